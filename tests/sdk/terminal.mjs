#!/usr/bin/env node
// Drives the reference SDK's terminal client (sandbox-agent@0.4.2 `connectProcessTerminal`, the
// ProcessTerminalSession its React <ProcessTerminal> uses) against a server's
// /v1/processes/{id}/terminal/ws, the way that component does: resize once ready, keystrokes as
// strings, exit and close handling.
//
//   SANDBOX_URL=http://127.0.0.1:2468 SANDBOX_TOKEN=secret node --experimental-websocket terminal.mjs
//
// Needs a global WebSocket (Node 22+, or Node 20 with --experimental-websocket). Prints one JSON
// line per check, {"method", "ok", "detail"}, and exits 1 if any check failed.

import { SandboxAgent } from "sandbox-agent";
import { check, describe, emit, equal, expect, failures, poll } from "./checks.mjs";

const BASE_URL = process.env.SANDBOX_URL;
const TOKEN = process.env.SANDBOX_TOKEN || undefined;
const TEXT = "héllo ✓ 日本語";

/** A terminal session and everything it reported, as <ProcessTerminal> listens to it. */
function attach(sdk, id) {
  const session = sdk.connectProcessTerminal(id);
  const seen = { ready: null, text: "", exits: [], errors: [], closed: false };
  const decoder = new TextDecoder();
  session.onReady((frame) => { seen.ready = frame; });
  session.onData((bytes) => { seen.text += decoder.decode(bytes, { stream: true }); });
  session.onExit((frame) => { seen.exits.push(frame); });
  session.onError((error) => { seen.errors.push(error.message); });
  session.onClose(() => { seen.closed = true; });
  return { session, seen };
}

async function output(seen, needle) {
  await poll(`output ${JSON.stringify(needle)}`, () => seen.text.includes(needle));
}

async function main() {
  expect(BASE_URL, "set SANDBOX_URL (and SANDBOX_TOKEN if the server has a token)");
  expect(typeof globalThis.WebSocket === "function", "no global WebSocket: use Node 22+ or --experimental-websocket");
  const sdk = new SandboxAgent({ baseUrl: BASE_URL, token: TOKEN });
  const shell = await sdk.createProcess({ command: "sh", tty: true, interactive: true });
  const { session, seen } = attach(sdk, shell.id);

  await check("connectProcessTerminal(ready)", async () => {
    await poll("the ready frame", () => seen.ready);
    equal("ready", seen.ready, { type: "ready", processId: shell.id });
    return `ready for ${shell.id}`;
  });
  await check("resize", async () => {
    session.resize({ cols: 100, rows: 30 });
    session.sendInput("stty size\n");
    await output(seen, "30 100");
    return "stty size: 30 100";
  });
  await check("sendInput(string)", async () => {
    session.sendInput(`printf '%s|%s\\n' '${TEXT}' end\n`);
    await output(seen, `${TEXT}|end`);
    return "utf8 by default";
  });
  await check("sendInput(bytes)", async () => {
    session.sendInput(new TextEncoder().encode("printf '%s|%s\\n' bytes ok\n"));
    await output(seen, "bytes|ok");
    return "base64";
  });
  await check("sendInput(Ctrl-C)", async () => {
    // The marker is printed by the job itself, so Ctrl-C finds it in the foreground.
    session.sendInput("sh -c 'echo job-started; exec sleep 30'\n");
    await output(seen, "job-started\r\n");
    session.sendInput("\u0003");
    session.sendInput("echo rc=$?\n");
    await output(seen, "rc=130");
    return "sleep interrupted, $? = 130";
  });
  await check("onExit", async () => {
    session.sendInput("exit 5\n");
    await poll("the exit frame", () => seen.exits.length);
    equal("exit", seen.exits, [{ type: "exit", exitCode: 5 }]);
    await session.closed;
    equal("errors", seen.errors, []);
    return "exitCode 5, then closed";
  });

  await check("close()", async () => {
    const cat = await sdk.createProcess({ command: "cat", tty: true, interactive: true });
    const other = attach(sdk, cat.id);
    await poll("the ready frame", () => other.seen.ready);
    other.session.close();
    await other.session.closed;
    equal("status after close", (await sdk.getProcess(cat.id)).status, "running");
    await sdk.killProcess(cat.id, { waitMs: 2000 });
    await sdk.deleteProcess(cat.id);
    return "socket closed, process left running";
  });

  await check("onError(error frame)", async () => {
    const cat = await sdk.createProcess({ command: "cat", tty: true, interactive: true });
    const other = attach(sdk, cat.id);
    await poll("the ready frame", () => other.seen.ready);
    other.session.socket.send(JSON.stringify({ type: "resize", cols: 0, rows: 24 }));
    const [message] = await poll("an error", () => other.seen.errors.length && other.seen.errors);
    expect(message.includes("cols"), `the error does not name cols: ${message}`);
    other.session.sendInput("still here\n");
    await output(other.seen, "still here");
    other.session.close();
    await sdk.killProcess(cat.id, { waitMs: 2000 });
    return message;
  });

  await check("connectProcessTerminal(backlog)", async () => {
    const early = await sdk.createProcess({ command: "sh", args: ["-c", "echo before-connect; exec cat"], tty: true });
    await poll("the early output in the log", async () => (await sdk.getProcessLogs(early.id)).entries.length);
    const other = attach(sdk, early.id);
    await output(other.seen, "before-connect");
    other.session.close();
    await sdk.killProcess(early.id, { waitMs: 2000 });
    return "output from before the socket opened arrives first";
  });

  await check("connectProcessTerminal(not a tty)", async () => {
    const plain = await sdk.createProcess({ command: "cat", interactive: true });
    const other = attach(sdk, plain.id);
    // Not `await closed`: Node 20's WebSocket fires no close event after a refused handshake (nodejs/undici#3546).
    await poll("the handshake failure", () => other.seen.errors.length);
    equal("ready", other.seen.ready, null);
    equal("errors", other.seen.errors, ["Terminal websocket connection failed."]);
    await sdk.killProcess(plain.id, { waitMs: 2000 });
    return "the handshake is refused";
  });
  await sdk.dispose();
}

main()
  .catch((error) => emit("main", false, describe(error)))
  // A session abandoned by a failed check may keep its socket open; exit explicitly.
  .finally(() => process.exit(failures() ? 1 : 0));
