// The inspector page: desktop status and control, processes and their logs, screenshots,
// recordings and the live view. Every API error is shown in the message list.

import { ApiError, call, decodeBase64, token } from "./api.js";
import { LiveView } from "./stream.js";

const STATUS_POLL_MS = 2000;
const LISTS_POLL_MS = 5000;
const LOG_TAIL = 20;
const MAX_MESSAGES = 6;

const $ = (id) => document.getElementById(id);

// -- messages -------------------------------------------------------------------------------

function showMessage(text, kind = "error", context = "") {
  const list = $("messages");
  for (const item of list.children) {
    if (item.dataset.text === text) {
      const count = Number(item.dataset.count || 1) + 1;
      item.dataset.count = String(count);
      item.querySelector(".count").textContent = ` (×${count})`;
      return;
    }
  }
  const item = document.createElement("li");
  item.className = `message ${kind}`;
  item.dataset.text = text;
  item.dataset.kind = kind;
  item.dataset.context = context;
  const body = document.createElement("span");
  body.className = "text";
  body.textContent = text;
  const count = document.createElement("span");
  count.className = "count";
  const close = document.createElement("button");
  close.type = "button";
  close.className = "dismiss";
  close.setAttribute("aria-label", "Dismiss message");
  close.textContent = "×";
  close.addEventListener("click", () => item.remove());
  item.append(body, count, close);
  list.prepend(item);
  while (list.children.length > MAX_MESSAGES) list.lastElementChild.remove();
}

/** A success of `context` makes its earlier errors obsolete. */
function clearMessages(context) {
  for (const item of [...$("messages").children]) {
    if (item.dataset.context === context) item.remove();
  }
}

function reportError(context, error) {
  if (error instanceof ApiError && error.status === 401) {
    // One message for every call the token failed, not one per panel.
    authorized = false;
    showMessage("The server refused the API token (401): enter its --token above.", "error", "auth");
    $("token-input").focus();
    return;
  }
  const text = error instanceof Error ? error.message : String(error);
  showMessage(`${context}: ${text}`, "error", context);
}

/** Run an action from a button: disabled while it runs, errors shown. */
async function action(button, context, work) {
  if (button) button.disabled = true;
  try {
    const result = await work();
    clearMessages(context);
    return result;
  } catch (error) {
    reportError(context, error);
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

// -- formatting -----------------------------------------------------------------------------

function duration(ms) {
  let s = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  const pad = (n) => String(n).padStart(2, "0");
  return h ? `${h}h ${pad(m)}m ${pad(s)}s` : m ? `${m}m ${pad(s)}s` : `${s}s`;
}

function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

function element(tag, { text, className, attrs } = {}, ...children) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  node.append(...children);
  return node;
}

// -- desktop --------------------------------------------------------------------------------

let desktop = null; // the last status
let statusBusy = false;
let authorized = true; // false after a 401: polling pauses until another token is given

async function refreshStatus() {
  if (statusBusy) return;
  statusBusy = true;
  try {
    renderStatus(await call("GET", "/v1/desktop/status"));
    authorized = true;
    clearMessages("desktop status");
    clearMessages("auth");
  } catch (error) {
    reportError("desktop status", error);
  } finally {
    statusBusy = false;
  }
}

function renderStatus(status) {
  const previous = desktop;
  desktop = status;
  const state = $("desktop-state");
  state.textContent = status.state.replace("_", " ");
  state.dataset.state = status.state;
  $("desktop-display").textContent = status.display || "–";
  const r = status.resolution;
  $("desktop-resolution").textContent = r ? `${r.width} × ${r.height}${r.dpi ? ` at ${r.dpi} dpi` : ""}` : "–";
  $("desktop-restarts").textContent = status.restartCount ?? (status.state === "active" ? "0" : "–");
  const error = status.lastError;
  $("desktop-error").textContent = error ? `${error.code}: ${error.message}` : "–";
  const missing = [...(status.missingDependencies || [])];
  const optional = status.missingOptionalDependencies || [];
  $("desktop-missing").textContent = missing.length || optional.length
    ? [missing.join(", "), optional.length ? `optional: ${optional.join(", ")}` : ""].filter(Boolean).join("; ")
    : "none";
  $("desktop-install").hidden = !status.installCommand;
  $("desktop-install-command").textContent = status.installCommand || "";
  const list = $("desktop-processes");
  list.replaceChildren(...(status.processes || []).map((p) => element("li", {},
    element("strong", { text: p.name }),
    ` ${p.running ? "running" : "stopped"}`,
    p.pid ? element("span", { className: "muted", text: ` pid ${p.pid}` }) : "",
    p.processId ? element("span", { className: "muted", text: ` (${p.processId})` }) : "")));
  if (!list.children.length) list.append(element("li", { className: "muted", text: "none" }));
  renderUptime();
  if (!previous || previous.state !== status.state) refreshLists();
}

function renderUptime() {
  const started = desktop && desktop.startedAt && Date.parse(desktop.startedAt);
  $("desktop-uptime").textContent = started ? duration(Date.now() - started) : "–";
}

function positiveInt(input, name) {
  const text = input.value.trim();
  if (text === "") return undefined;
  const value = Number(text);
  // Sent as typed: the server validates ranges and answers with a problem that names the field.
  if (!Number.isInteger(value)) throw new ApiError(`${name} must be a whole number, got "${text}"`);
  return value;
}

async function startDesktop(event) {
  event.preventDefault();
  await action($("desktop-start"), "start desktop", async () => {
    const body = {
      width: positiveInt($("start-width"), "width"),
      height: positiveInt($("start-height"), "height"),
      displayNum: positiveInt($("start-display"), "display"),
    };
    renderStatus(await call("POST", "/v1/desktop/start", { json: body }));
  });
}

async function stopDesktop() {
  await action($("desktop-stop"), "stop desktop", async () => {
    live.disconnect();
    renderStatus(await call("POST", "/v1/desktop/stop"));
  });
}

// -- processes ------------------------------------------------------------------------------

let listsBusy = false;

async function refreshLists() {
  if (listsBusy || !authorized) return;
  listsBusy = true;
  try {
    await Promise.all([refreshProcesses(), refreshRecordings()]);
  } finally {
    listsBusy = false;
  }
}

async function refreshProcesses() {
  let processes;
  try {
    processes = (await call("GET", "/v1/processes")).processes;
    clearMessages("processes");
  } catch (error) {
    reportError("processes", error);
    return;
  }
  processes.sort((a, b) => Number(a.id.replace(/\D/g, "")) - Number(b.id.replace(/\D/g, "")));
  const tails = await Promise.all(processes.map((p) => logTail(p.id)));
  const items = processes.map((p, i) => {
    const summary = element("summary", {},
      element("strong", { text: p.command }), " ",
      element("span", { className: "muted", text: (p.args || []).join(" ") }));
    const facts = element("p", { className: "small" },
      element("span", { text: p.id }),
      element("span", { className: `badge`, attrs: { "data-state": p.status }, text: p.status }),
      element("span", { text: p.pid ? `pid ${p.pid}` : p.exitCode !== undefined ? `exit ${p.exitCode}` : "" }),
      element("span", { className: "muted", text: `owner ${p.owner}` }));
    const log = element("pre", { className: "log", attrs: { "aria-label": `Last ${LOG_TAIL} log entries of ${p.id}` } });
    log.textContent = tails[i] === null ? "(log unavailable)" : tails[i] || "(no output yet)";
    return element("li", { attrs: { "data-process-id": p.id, "data-command": p.command } },
      element("details", { attrs: { open: "" } }, summary, facts, log));
  });
  const list = $("process-list");
  list.replaceChildren(...items);
  if (!items.length) list.append(element("li", { className: "muted", text: "No processes." }));
}

async function logTail(id) {
  try {
    const logs = await call("GET", `/v1/processes/${encodeURIComponent(id)}/logs`, { query: { tail: LOG_TAIL } });
    return logs.entries.map((e) => decodeBase64(e.data)).join("");
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) reportError(`logs of ${id}`, error);
    return null;
  }
}

// -- screenshot -----------------------------------------------------------------------------

let screenshotUrl = null;

async function takeScreenshot() {
  await action($("screenshot-refresh"), "screenshot", async () => {
    const started = performance.now();
    const blob = await call("GET", "/v1/desktop/screenshot", { as: "blob", accept: "image/*" });
    const img = $("screenshot-img");
    if (screenshotUrl) URL.revokeObjectURL(screenshotUrl);
    screenshotUrl = URL.createObjectURL(blob);
    await new Promise((resolve, reject) => {
      img.onload = resolve;
      img.onerror = () => reject(new Error("the image could not be decoded"));
      img.src = screenshotUrl;
    });
    img.hidden = false;
    const ms = Math.round(performance.now() - started);
    $("screenshot-info").textContent =
      `${img.naturalWidth} × ${img.naturalHeight}, ${bytes(blob.size)} ${blob.type}, taken ${new Date().toLocaleTimeString()} in ${ms} ms`;
  });
}

// -- recordings -----------------------------------------------------------------------------

async function refreshRecordings() {
  let recordings;
  try {
    recordings = (await call("GET", "/v1/desktop/recordings")).recordings;
    clearMessages("recordings");
  } catch (error) {
    reportError("recordings", error);
    return;
  }
  const rows = recordings.map((r) => {
    const download = element("button", { text: "Download", attrs: { type: "button", "aria-label": `Download ${r.fileName}` } });
    download.addEventListener("click", () => downloadRecording(download, r));
    const remove = element("button", { text: "Delete", className: "secondary", attrs: { type: "button", "aria-label": `Delete ${r.id}` } });
    remove.addEventListener("click", () => deleteRecording(remove, r));
    return element("tr", { attrs: { "data-recording-id": r.id } },
      element("td", { text: r.id }),
      element("td", {}, element("span", { className: "badge", attrs: { "data-state": r.status }, text: r.status })),
      element("td", { text: bytes(r.bytes || 0) }),
      element("td", { text: r.startedAt ? new Date(r.startedAt).toLocaleTimeString([], { hour12: false }) : "" }),
      element("td", { className: "row-actions" }, download, remove));
  });
  const body = $("recording-list");
  body.replaceChildren(...rows);
  if (!rows.length) body.append(element("tr", {}, element("td", { className: "muted", text: "No recordings.", attrs: { colspan: "5" } })));
}

async function startRecording(event) {
  event.preventDefault();
  await action($("recording-start"), "start recording", async () => {
    const fps = positiveInt($("recording-fps"), "frames per second");
    await call("POST", "/v1/desktop/recording/start", { json: fps === undefined ? {} : { fps } });
    await refreshRecordings();
  });
}

async function stopRecording() {
  await action($("recording-stop"), "stop recording", async () => {
    await call("POST", "/v1/desktop/recording/stop");
    await refreshRecordings();
  });
}

async function downloadRecording(button, recording) {
  // A plain link cannot carry the token, so: fetch with it → blob → object URL → click.
  await action(button, `download ${recording.id}`, async () => {
    const blob = await call("GET", `/v1/desktop/recordings/${encodeURIComponent(recording.id)}/download`,
      { as: "blob", accept: "video/mp4" });
    const url = URL.createObjectURL(blob);
    const link = element("a", { attrs: { href: url, download: recording.fileName || `${recording.id}.mp4` } });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    showMessage(`${recording.fileName}: ${bytes(blob.size)} downloaded`, "info");
  });
}

async function deleteRecording(button, recording) {
  await action(button, `delete ${recording.id}`, async () => {
    await call("DELETE", `/v1/desktop/recordings/${encodeURIComponent(recording.id)}`, { as: "none" });
    await refreshRecordings();
  });
}

// -- live view ------------------------------------------------------------------------------

const STATE_TEXT = {
  idle: "not connected", connecting: "starting the stream…", signalling: "signalling…",
  negotiating: "negotiating…", connected: "connected", disconnected: "disconnected", failed: "failed",
};

const live = new LiveView($("live-video"), {
  onState(state, detail) {
    const label = $("live-state");
    label.dataset.state = state;
    label.textContent = STATE_TEXT[state] + (detail ? ` (${detail})` : "");
    const active = !["idle", "disconnected", "failed"].includes(state);
    $("live-connect").disabled = active;
    $("live-disconnect").disabled = !active;
    $("live-placeholder").hidden = state === "connected";
    if (!active) {
      $("live-stats").textContent = "";
      $("live-control").textContent = "";
      $("live-take-control").hidden = true;
    }
  },
  onError: (text) => showMessage(text),
  onStats(stats, video) {
    const parts = [`${video.videoWidth}×${video.videoHeight}`, `${stats.fps.toFixed(1)} fps`, `${Math.round(stats.kbps)} kbit/s`];
    if (stats.codec) parts.push(stats.codec.replace("video/", ""));
    if (stats.rttMs !== null) parts.push(`input RTT ${Math.round(stats.rttMs)} ms`);
    $("live-stats").textContent = parts.join(" · ");
  },
  onControl(text, canTake) {
    $("live-control").textContent = text;
    $("live-take-control").hidden = !canTake;
  },
});

async function connectLive() {
  await action(null, "live view", async () => {
    try {
      await live.connect();
    } catch (error) {
      live.disconnect("failed");
      throw error;
    }
  });
}

async function stopStreaming() {
  await action($("stream-stop"), "stop streaming", async () => {
    live.disconnect();
    await call("POST", "/v1/desktop/stream/stop");
  });
}

// -- wiring ---------------------------------------------------------------------------------

function useToken(value) {
  token.set(value);
  authorized = true;
  $("token-input").value = "";
  $("token-input").placeholder = value ? "token set (enter another to replace it)" : "the server's --token";
  refreshStatus();
  refreshLists();
}

function init() {
  token.adoptFromHash();
  useToken(token.get());
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    useToken($("token-input").value.trim());
  });
  $("token-forget").addEventListener("click", () => {
    live.disconnect();
    useToken("");
  });
  $("desktop-start-form").addEventListener("submit", startDesktop);
  $("desktop-stop").addEventListener("click", stopDesktop);
  $("desktop-refresh").addEventListener("click", () => refreshStatus());
  $("processes-refresh").addEventListener("click", () => action($("processes-refresh"), "processes", refreshProcesses));
  $("screenshot-refresh").addEventListener("click", takeScreenshot);
  $("recording-form").addEventListener("submit", startRecording);
  $("recording-stop").addEventListener("click", stopRecording);
  $("recordings-refresh").addEventListener("click", () => action($("recordings-refresh"), "recordings", refreshRecordings));
  $("live-connect").addEventListener("click", connectLive);
  $("live-disconnect").addEventListener("click", () => live.disconnect());
  $("live-take-control").addEventListener("click", () => live.takeControl());
  $("stream-stop").addEventListener("click", stopStreaming);
  window.addEventListener("hashchange", () => {
    if (token.adoptFromHash()) useToken(token.get());
  });
  // Polls skip while the tab is hidden; errors of background polls are shown like any other.
  setInterval(() => document.hidden || !authorized || refreshStatus(), STATUS_POLL_MS);
  setInterval(() => document.hidden || !authorized || refreshLists(), LISTS_POLL_MS);
  setInterval(renderUptime, 1000);
  window.inspector = { live, refreshStatus, refreshLists }; // for debugging from the console (and the tests)
}

init();
