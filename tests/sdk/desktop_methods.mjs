#!/usr/bin/env node
// Drives every desktop method of the reference TypeScript SDK (sandbox-agent@0.4.2) against a
// server, checking each answer the way a real client would use it.
//
//   SANDBOX_URL=http://127.0.0.1:2468 SANDBOX_TOKEN=secret node desktop_methods.mjs
//
// Optional: SANDBOX_DISPLAY_NUM (passed to startDesktop), SANDBOX_CALL_TIMEOUT_MS (per call, 15000).
// Prints one JSON line per check, {"method", "ok", "detail"}, and exits 1 if any check failed.
// Recording and streaming in a real browser: tests/clients/reference_sdk/test_sdk_viewer.py.

import { tmpdir } from "node:os";
import { SandboxAgent, SandboxAgentError } from "sandbox-agent";
import { check, describe, emit, equal, expect, failures, poll } from "./checks.mjs";

const BASE_URL = process.env.SANDBOX_URL;
const TOKEN = process.env.SANDBOX_TOKEN || undefined;
const DISPLAY_NUM = process.env.SANDBOX_DISPLAY_NUM ? Number(process.env.SANDBOX_DISPLAY_NUM) : undefined;
const WIDTH = 1024;
const HEIGHT = 768;

const LINE = "compat héllo wörld ✓ 日本語";
const PASTE = "pasted ünïcode ✓ 🙂\n";
const TITLE = `sdk-compat-${process.pid}`;
const DIR = `${tmpdir()}/sdk-compat-${process.pid}-${Date.now()}`;
// Beside DIR, not in it: the desktop's apps run as its own user, in its own view of the files, and DIR is made by
// the server's file API (the machine's, as the server's user). The runner points TMPDIR at a folder the desktop
// sees and may write to (tests/clients/reference_sdk/test_sdk_compat.py).
const TYPED = `${DIR}-typed.txt`;

/** Fails unless every listed field of `value` has the given `typeof` ("integer" for whole numbers). */
function shape(what, value, fields, optional = {}) {
  expect(value !== null && typeof value === "object", `${what}: not an object: ${JSON.stringify(value)}`);
  const ofType = (v, type) => {
    if (type === "integer") return Number.isInteger(v);
    return type === "array" ? Array.isArray(v) : typeof v === type;
  };
  for (const [field, type] of Object.entries(fields)) {
    expect(ofType(value[field], type), `${what}.${field} is not ${type}: ${JSON.stringify(value)}`);
  }
  for (const [field, type] of Object.entries(optional)) {
    // The reference omits absent optional fields; null is tolerated because the SDK types allow it.
    if (value[field] !== undefined && value[field] !== null) {
      expect(ofType(value[field], type), `${what}.${field} is not ${type}: ${JSON.stringify(value)}`);
    }
  }
}

/** The SDK call must fail with a SandboxAgentError of this status carrying a problem+json `code`. */
async function expectProblem(call, status, code) {
  try {
    const value = await call();
    throw new Error(`expected ${status} ${code}, got success: ${JSON.stringify(value)}`);
  } catch (error) {
    if (!(error instanceof SandboxAgentError)) throw error;
    const problem = error.problem;
    expect(error.status === status, `status ${error.status} instead of ${status}: ${JSON.stringify(problem)}`);
    expect(problem && typeof problem === "object", `problem is not parsed JSON (got ${JSON.stringify(problem)})`);
    shape("problem", problem, { type: "string", title: "string", status: "integer", detail: "string" });
    expect(problem.status === status, `problem.status ${problem.status} != ${status}`);
    if (code !== undefined) expect(problem.code === code, `problem.code ${JSON.stringify(problem.code)} != ${code}`);
    const contentType = error.response.headers.get("content-type") ?? "";
    expect(contentType.startsWith("application/problem+json"), `content-type ${contentType}`);
    return problem;
  }
}

function pngSize(bytes) {
  const magic = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
  expect(bytes instanceof Uint8Array, `not a Uint8Array: ${Object.prototype.toString.call(bytes)}`);
  expect(magic.every((b, i) => bytes[i] === b), `no PNG magic: ${hex(bytes)}`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return { width: view.getUint32(16), height: view.getUint32(20) };
}

function jpegSize(bytes) {
  expect(bytes instanceof Uint8Array, `not a Uint8Array: ${Object.prototype.toString.call(bytes)}`);
  expect(bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff, `no JPEG magic: ${hex(bytes)}`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  // Walk the marker segments to the frame header (SOFn, but not DHT/JPG/DAC which share the range).
  for (let at = 2, i = 0; at + 9 < bytes.length && i < 1000; i += 1) {
    const marker = bytes[at + 1];
    if (marker >= 0xc0 && marker <= 0xcf && ![0xc4, 0xc8, 0xcc].includes(marker)) {
      return { width: view.getUint16(at + 7), height: view.getUint16(at + 5) };
    }
    at += 2 + view.getUint16(at + 2);
  }
  throw new Error("JPEG without a frame header");
}

function hex(bytes) {
  return Array.from(bytes.slice(0, 8), (b) => b.toString(16).padStart(2, "0")).join(" ");
}

const MOUSE = [{ x: "integer", y: "integer" }, { screen: "integer", window: "string" }];
const WINDOW = {
  id: "string", title: "string", x: "integer", y: "integer", width: "integer", height: "integer", isActive: "boolean",
};
const PROCESS = [
  { id: "string", command: "string", args: "array", tty: "boolean", interactive: "boolean", owner: "string",
    status: "string", createdAtMs: "integer" },
  { cwd: "string", pid: "integer", exitCode: "integer", exitedAtMs: "integer" },
];

/** The answer of a mouse call is the pointer at (x, y); on a mismatch, says where it is a moment later. */
async function mouseAt(sdk, what, position, x, y) {
  shape(what, position, ...MOUSE);
  if (position.x !== x || position.y !== y) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    const later = await sdk.getDesktopMousePosition();
    throw new Error(`${what}: answered ${position.x},${position.y} for ${x},${y}; `
      + `200 ms later the pointer is at ${later.x},${later.y}`);
  }
  return `at ${x},${y}${position.window ? ` over window ${position.window}` : ""}`;
}

/** Waits until the terminal's output file holds exactly `expected`; fails showing what it holds. */
async function waitForTyped(sdk, expected, what) {
  let text = "";
  try {
    await poll(what, async () => {
      text = new TextDecoder().decode(await sdk.readFsFile({ path: TYPED }));
      return text === expected;
    });
  } catch (error) {
    throw new Error(`${error.message}; the file holds ${JSON.stringify(text)}`);
  }
}

async function main() {
  expect(BASE_URL, "set SANDBOX_URL (and SANDBOX_TOKEN if the server has a token)");
  // As documented: the constructor starts polling /v1/health; the first call waits for it.
  const sdk = new SandboxAgent({ baseUrl: BASE_URL, token: TOKEN });
  const state = {};

  await check("getHealth", async () => {
    equal("health", await sdk.getHealth(), { status: "ok" });
  });
  if (TOKEN) {
    await check("getDesktopStatus(wrong token)", async () => {
      const stranger = new SandboxAgent({ baseUrl: BASE_URL, token: `${TOKEN}-wrong`, skipHealthCheck: true });
      const problem = await expectProblem(() => stranger.getDesktopStatus(), 401);
      equal("problem.type", problem.type, "urn:sandbox-agent:error:token_invalid");
      return "401 token_invalid";
    });
  }

  await check("getDesktopStatus(before start)", async () => {
    const status = await sdk.getDesktopStatus();
    shape("status", status, { state: "string" });
    if (status.state === "active") return "already active (inactive check skipped)";
    await expectProblem(() => sdk.getDesktopMousePosition(), 409, "desktop_runtime_inactive");
    return `${status.state}; an action is 409 desktop_runtime_inactive`;
  });

  await check("startDesktop", async () => {
    const status = await sdk.startDesktop({ width: WIDTH, height: HEIGHT, displayNum: DISPLAY_NUM });
    shape("status", status, { state: "string", display: "string" }, { startedAt: "string", processes: "array" });
    equal("state", status.state, "active");
    equal("resolution", [status.resolution?.width, status.resolution?.height], [WIDTH, HEIGHT]);
    state.display = status.display;
    return `${status.display} ${WIDTH}x${HEIGHT}`;
  });

  await check("getDesktopStatus", async () => {
    const status = await sdk.getDesktopStatus();
    shape("status", status, { state: "string", display: "string", processes: "array" },
      { windows: "array", startedAt: "string", runtimeLogPath: "string", missingDependencies: "array" });
    equal("state", status.state, "active");
    equal("display", status.display, state.display);
    for (const p of status.processes) shape("process", p, { name: "string", running: "boolean" }, { pid: "integer" });
    for (const w of status.windows ?? []) shape("window", w, WINDOW);
    return `${status.processes.map((p) => p.name).join(",")}`;
  });

  await check("getDesktopDisplayInfo", async () => {
    const info = await sdk.getDesktopDisplayInfo();
    shape("info", info, { display: "string" });
    shape("resolution", info.resolution, { width: "integer", height: "integer" }, { dpi: "integer" });
    equal("display", info.display, state.display);
    equal("size", [info.resolution.width, info.resolution.height], [WIDTH, HEIGHT]);
    return `${info.display} ${info.resolution.width}x${info.resolution.height}@${info.resolution.dpi}`;
  });

  await check("takeDesktopScreenshot(png)", async () => {
    const bytes = await sdk.takeDesktopScreenshot();
    equal("PNG size", pngSize(bytes), { width: WIDTH, height: HEIGHT });
    return `${bytes.length} bytes PNG ${WIDTH}x${HEIGHT}`;
  });

  await check("takeDesktopScreenshot(jpeg)", async () => {
    const bytes = await sdk.takeDesktopScreenshot({ format: "jpeg", quality: 40, scale: 0.5, showCursor: true });
    equal("JPEG size (scale 0.5)", jpegSize(bytes), { width: WIDTH / 2, height: HEIGHT / 2 });
    return `${bytes.length} bytes JPEG ${WIDTH / 2}x${HEIGHT / 2}`;
  });

  await check("takeDesktopRegionScreenshot", async () => {
    const bytes = await sdk.takeDesktopRegionScreenshot({ x: 100, y: 50, width: 200, height: 120 });
    equal("PNG size", pngSize(bytes), { width: 200, height: 120 });
    const jpeg = await sdk.takeDesktopRegionScreenshot({
      x: 0, y: 0, width: 64, height: 32, format: "jpeg", quality: 90,
    });
    equal("JPEG size", jpegSize(jpeg), { width: 64, height: 32 });
    return "PNG 200x120, JPEG 64x32";
  });

  await check("moveDesktopMouse", async () => {
    return mouseAt(sdk, "move", await sdk.moveDesktopMouse({ x: 321, y: 123 }), 321, 123);
  });
  await check("getDesktopMousePosition", async () => {
    return mouseAt(sdk, "position", await sdk.getDesktopMousePosition(), 321, 123);
  });

  // Files: the scratch directory also receives what the terminal below types.
  await check("mkdirFs", async () => {
    const made = await sdk.mkdirFs({ path: DIR });
    shape("mkdir", made, { path: "string" });
    equal("path", made.path, DIR);
  });
  await check("writeFsFile", async () => {
    const written = await sdk.writeFsFile({ path: `${DIR}/note.txt` }, "héllo\n");
    shape("write", written, { path: "string", bytesWritten: "integer" });
    equal("bytesWritten", written.bytesWritten, Buffer.byteLength("héllo\n"));
  });
  await check("statFs", async () => {
    const stat = await sdk.statFs({ path: `${DIR}/note.txt` });
    shape("stat", stat, { path: "string", entryType: "string", size: "integer" }, { modified: "string" });
    equal("stat", [stat.entryType, stat.size], ["file", Buffer.byteLength("héllo\n")]);
  });
  await check("listFsEntries", async () => {
    const entries = await sdk.listFsEntries({ path: DIR });
    expect(Array.isArray(entries), `not an array: ${JSON.stringify(entries)}`);
    entries.forEach((e) => shape("entry", e, { name: "string", path: "string", entryType: "string", size: "integer" }));
    equal("names", entries.map((e) => e.name), ["note.txt"]);
  });
  await check("readFsFile", async () => {
    equal("content", new TextDecoder().decode(await sdk.readFsFile({ path: `${DIR}/note.txt` })), "héllo\n");
  });
  await check("moveFs", async () => {
    const moved = await sdk.moveFs({ from: `${DIR}/note.txt`, to: `${DIR}/sub/renamed.txt` });
    equal("move", moved, { from: `${DIR}/note.txt`, to: `${DIR}/sub/renamed.txt` });
  });

  // A terminal whose shell copies its keyboard input into TYPED: what arrives there is what was typed.
  // -u8 makes xterm encode input as UTF-8 whatever the server's locale.
  await check("launchDesktopApp", async () => {
    const launched = await sdk.launchDesktopApp({
      app: "xterm",
      args: ["-u8", "-T", TITLE, "-geometry", "80x24", "-e", "sh", "-c", `exec cat > '${TYPED}'`],
      wait: true,
    });
    shape("launch", launched, { processId: "string", pid: "integer", windowId: "string" });
    expect(/^\d+$/.test(launched.windowId), `windowId is not a decimal X id: ${launched.windowId}`);
    Object.assign(state, { processId: launched.processId, windowId: launched.windowId });
    await poll("the shell to create the output file", () => sdk.statFs({ path: TYPED }).catch(() => null));
    return `${launched.processId} pid ${launched.pid} window ${launched.windowId}`;
  });

  await check("listDesktopWindows", async () => {
    const list = await sdk.listDesktopWindows();
    shape("list", list, { windows: "array" });
    list.windows.forEach((w) => shape("window", w, WINDOW));
    const ours = list.windows.find((w) => w.id === state.windowId);
    expect(ours, `window ${state.windowId} not listed: ${JSON.stringify(list.windows)}`);
    equal("title", ours.title, TITLE);
    return `${list.windows.length} window(s)`;
  });

  await check("focusDesktopWindow", async () => {
    const info = await sdk.focusDesktopWindow(state.windowId);
    shape("window", info, WINDOW);
    equal("window", [info.id, info.isActive], [state.windowId, true]);
  });
  await check("getDesktopFocusedWindow", async () => {
    const info = await poll("the terminal to be focused", async () => {
      const focused = await sdk.getDesktopFocusedWindow();
      return focused.id === state.windowId && focused;
    });
    shape("window", info, WINDOW);
    equal("isActive", info.isActive, true);
    return `${info.id} "${info.title}"`;
  });
  await check("moveDesktopWindow", async () => {
    const info = await sdk.moveDesktopWindow(state.windowId, { x: 60, y: 80 });
    shape("window", info, WINDOW);
    equal("position", [info.id, info.x, info.y], [state.windowId, 60, 80]);
    return `at ${info.x},${info.y}`;
  });
  await check("resizeDesktopWindow", async () => {
    const info = await sdk.resizeDesktopWindow(state.windowId, { width: 500, height: 300 });
    shape("window", info, WINDOW);
    // A terminal rounds its size to whole character cells.
    expect(Math.abs(info.width - 500) < 20 && Math.abs(info.height - 300) < 30, `size ${info.width}x${info.height}`);
    equal("position kept", [info.x, info.y], [60, 80]);
    state.window = info;
    return `${info.width}x${info.height}`;
  });

  await check("typeDesktopText", async () => {
    equal("type", await sdk.typeDesktopText({ text: "junk" }), { ok: true });
    return "typed \"junk\" (Ctrl+U erases it next)";
  });
  await check("pressDesktopKey(ctrl+u)", async () => {
    // Ctrl+U erases the pending line in the terminal: only what follows reaches the file.
    equal("press", await sdk.pressDesktopKey({ key: "u", modifiers: { ctrl: true } }), { ok: true });
    equal("type", await sdk.typeDesktopText({ text: `${LINE}\n`, delayMs: 0 }), { ok: true });
    await waitForTyped(sdk, `${LINE}\n`, "the typed line");
    return `file holds ${JSON.stringify(LINE)}`;
  });
  await check("keyDownDesktop", async () => {
    equal("down", await sdk.keyDownDesktop({ key: "shift" }), { ok: true });
    equal("press", await sdk.pressDesktopKey({ key: "a" }), { ok: true });
  });
  await check("keyUpDesktop", async () => {
    equal("up", await sdk.keyUpDesktop({ key: "shift" }), { ok: true });
    equal("press", await sdk.pressDesktopKey({ key: "b" }), { ok: true });
    equal("press", await sdk.pressDesktopKey({ key: "Return" }), { ok: true });
    await waitForTyped(sdk, `${LINE}\nAb\n`, "'Ab' (a with Shift held, b after release)");
    return "Shift held for a, released for b";
  });

  // Row 0 of the terminal shows LINE; its first word "compat" starts at the client area's corner.
  const wordX = () => state.window.x + 10;
  const wordY = () => state.window.y + 8;
  await check("clickDesktop", async () => {
    const position = await sdk.clickDesktop({ x: wordX(), y: wordY(), button: "left", clickCount: 2 });
    await mouseAt(sdk, "click", position, wordX(), wordY());
    const primary = await poll("the double-clicked word in PRIMARY", async () => {
      const clip = await sdk.getDesktopClipboard({ selection: "primary" });
      return clip.text === "compat" && clip;
    });
    equal("selection", primary.selection, "primary");
    return "double click selected \"compat\"";
  });
  await check("mouseDownDesktop", async () => {
    const position = await sdk.mouseDownDesktop({ x: wordX(), y: wordY(), button: "left" });
    return mouseAt(sdk, "down", position, wordX(), wordY());
  });
  await check("mouseUpDesktop", async () => {
    // Released elsewhere on the terminal: the answer must be the pointer after the move.
    const position = await sdk.mouseUpDesktop({ x: wordX() + 40, y: wordY(), button: "left" });
    return mouseAt(sdk, "up", position, wordX() + 40, wordY());
  });
  await check("dragDesktopMouse", async () => {
    const end = [wordX() + 150, wordY()];
    // xterm counts presses within its multi-click time (250 ms) as one multi-click: a fresh drag needs a pause.
    await new Promise((resolve) => setTimeout(resolve, 600));
    const position = await sdk.dragDesktopMouse({ startX: wordX() - 8, startY: wordY(), endX: end[0], endY: end[1] });
    await mouseAt(sdk, "drag", position, ...end);
    const clip = await poll("a dragged selection", async () => {
      const got = await sdk.getDesktopClipboard({ selection: "primary" });
      return got.text.length > "compat".length && got;
    });
    expect(LINE.startsWith(clip.text), `dragged selection ${JSON.stringify(clip.text)} is not a prefix of the line`);
    return `selected ${JSON.stringify(clip.text)}`;
  });
  await check("scrollDesktop", async () => {
    await mouseAt(sdk, "scroll", await sdk.scrollDesktop({ x: 400, y: 300, deltaY: 2 }), 400, 300);
    return mouseAt(sdk, "scroll", await sdk.scrollDesktop({ x: 410, y: 310, deltaX: -1 }), 410, 310);
  });

  await check("setDesktopClipboard", async () => {
    equal("set", await sdk.setDesktopClipboard({ text: PASTE, selection: "both" }), { ok: true });
  });
  await check("getDesktopClipboard", async () => {
    const clipboard = await sdk.getDesktopClipboard();
    shape("clipboard", clipboard, { text: "string", selection: "string" });
    equal("clipboard", clipboard, { text: PASTE, selection: "clipboard" });
    const primary = await sdk.getDesktopClipboard({ selection: "primary" });
    equal("primary", [primary.text, primary.selection], [PASTE, "primary"]);
  });
  await check("pressDesktopKey(shift+Insert)", async () => {
    // xterm pastes PRIMARY on Shift+Insert. The paste is asynchronous (a key pressed next can overtake
    // it), so the pasted text brings its own newline, which hands the line to cat.
    equal("press", await sdk.pressDesktopKey({ key: "Insert", modifiers: { shift: true } }), { ok: true });
    await waitForTyped(sdk, `${LINE}\nAb\n${PASTE}`, "the pasted text");
    return `pasted ${JSON.stringify(PASTE)}`;
  });
  await check("pressDesktopKey(ctrl+d)", async () => {
    equal("press", await sdk.pressDesktopKey({ key: "d", modifiers: { ctrl: true } }), { ok: true });
    const info = await poll("the terminal to exit after EOF", async () => {
      const p = await sdk.getProcess(state.processId);
      return p.status === "exited" && p;
    });
    equal("exitCode", info.exitCode, 0);
    return "EOF ended cat; xterm exited 0";
  });

  await check("listProcesses", async () => {
    const all = await sdk.listProcesses();
    shape("list", all, { processes: "array" });
    all.processes.forEach((p) => shape("process", p, ...PROCESS));
    const desktop = await sdk.listProcesses({ owner: "desktop" });
    expect(desktop.processes.every((p) => p.owner === "desktop"), "owner filter ignored");
    const xterm = desktop.processes.find((p) => p.id === state.processId);
    expect(xterm, `${state.processId} (xterm) not among desktop processes`);
    // Like the reference, the command may be the path the app was found at.
    expect(/(^|\/)xterm$/.test(xterm.command), `command ${xterm.command}`);
    return `${all.processes.length} processes, ${desktop.processes.length} owned by the desktop`;
  });
  await check("getProcess", async () => {
    const info = await sdk.getProcess(state.processId);
    shape("process", info, ...PROCESS);
    equal("process", [info.id, info.owner, info.status], [state.processId, "desktop", "exited"]);
    equal("args", info.args.slice(0, 3), ["-u8", "-T", TITLE]);
  });
  await check("runProcess", async () => {
    const run = await sdk.runProcess({ command: "sh", args: ["-c", "printf 'out ✓'; printf err >&2; exit 3"] });
    shape("run", run, { timedOut: "boolean", stdout: "string", stderr: "string", stdoutTruncated: "boolean",
      stderrTruncated: "boolean", durationMs: "integer" }, { exitCode: "integer" });
    equal("run", [run.exitCode, run.stdout, run.stderr, run.timedOut], [3, "out ✓", "err", false]);
  });

  await check("openDesktopTarget", async () => {
    const open = () => sdk.openDesktopTarget({ target: `${DIR}/no/such/file.pdf` });
    // A target that does not exist is the caller's mistake: a 4xx naming it (docs/apps.md).
    const problem = await expectProblem(open, 422, "target_not_found");
    shape("problem", problem, { exitCode: "integer", processId: "string" });
    return `422 target_not_found, exit code ${problem.exitCode}`;
  });

  await check("focusDesktopWindow(unknown id)", async () => {
    await expectProblem(() => sdk.focusDesktopWindow("999999999"), 404, "window_not_found");
    return "404 window_not_found";
  });
  await check("pressDesktopKey(bad key)", async () => {
    await expectProblem(() => sdk.pressDesktopKey({ key: "NoSuchKeyName" }), 400, "desktop_invalid_action");
    return "400 desktop_invalid_action";
  });

  await check("deleteFsEntry", async () => {
    equal("delete", await sdk.deleteFsEntry({ path: DIR, recursive: true }), { path: DIR });
  });
  await check("stopDesktop", async () => {
    const status = await sdk.stopDesktop();
    shape("status", status, { state: "string" });
    equal("state", status.state, "inactive");
    equal("state afterwards", (await sdk.getDesktopStatus()).state, "inactive");
  });
  await sdk.dispose();
}

main()
  .catch((error) => emit("main", false, describe(error)))
  // Hung calls abandoned by a timeout may keep sockets open; exit explicitly.
  .finally(() => process.exit(failures() ? 1 : 0));
