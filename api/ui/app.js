// The inspector page: the server's desktops (desktops.js) and, for the selected one, its status and
// control, screenshots, recordings and the live view; processes are the server's. Every API error
// is shown in the message list.

import { ApiError, DEFAULT_DESKTOP, call, decodeBase64, desktopPath, desktopSelection, takeFromHash, token } from "./api.js";
import { checkGone, desktopEntry, initDesktops, markSelected, refreshDesktops, tickDesktops } from "./desktops.js";
import { LiveView, TRANSPORTS } from "./stream.js";
import { $, action, auth, bytes, clearMessages, duration, element, positiveInt, reportError, showMessage } from "./ui.js";

const STATUS_POLL_MS = 2000;
const LISTS_POLL_MS = 5000;
const LOG_TAIL = 20;

// -- which desktop the panels show ------------------------------------------------------------

const selected = () => desktopSelection.get();

/** Message contexts name the desktop unless it is the default one: "screenshot of dsk_…". */
function scoped(context, id = selected()) {
  return id === DEFAULT_DESKTOP ? context : `${context} of ${id}`;
}

/**
 * Whether background polls leave the desktop alone. Any request to /v1/desktops/{id}/... restarts
 * its idle clock (docs/desktops.md), so polling its status would keep it from ever idling out while
 * the page is open. Its state still comes from GET /v1/desktops, which does not count.
 */
function watchQuietly(id = selected()) {
  const entry = desktopEntry(id);
  return entry !== null && entry.idleTimeoutSeconds != null;
}

function isGone(error) {
  return error instanceof ApiError && error.status === 404 && error.problem?.code === "desktop_not_found";
}

/** An error of a background refresh: dropped if another desktop is shown now, a fallback if it is gone. */
function refreshFailed(id, context, error) {
  if (id !== selected()) return;
  if (isGone(error)) checkGone(id);
  else reportError(context, error);
}

/** Point every desktop panel at desktop `id` (a live view of the previous one is disconnected). */
function showDesktop(id) {
  if (id === selected()) {
    markSelected();
    return;
  }
  live.disconnect();
  desktopSelection.set(id);
  resetPanels();
  refreshStatus();
  refreshRecordings();
}

function desktopGone(id, reason) {
  if (id !== selected()) return;
  showMessage(`desktop ${id}: ${reason}; showing the default desktop`, "info", "desktop gone");
  showDesktop(DEFAULT_DESKTOP);
}

function resetPanels() {
  const id = selected();
  for (const label of document.querySelectorAll("[data-selected-desktop]")) label.textContent = id;
  markSelected();
  renderQuietNote();
  desktop = null;
  const state = $("desktop-state");
  state.textContent = "unknown";
  state.dataset.state = "unknown";
  for (const fact of ["display", "resolution", "uptime", "restarts", "error", "missing"]) {
    $(`desktop-${fact}`).textContent = "–";
  }
  $("desktop-install").hidden = true;
  $("desktop-processes").replaceChildren(element("li", { className: "muted", text: "none" }));
  const img = $("screenshot-img");
  img.hidden = true;
  img.removeAttribute("src");
  if (screenshotUrl) URL.revokeObjectURL(screenshotUrl);
  screenshotUrl = null;
  $("screenshot-info").textContent = "No screenshot yet.";
  $("recording-list").replaceChildren(
    element("tr", {}, element("td", { className: "muted", text: "Not loaded yet.", attrs: { colspan: "5" } })));
}

function renderQuietNote() {
  $("desktop-quiet").hidden = !watchQuietly();
}

// -- desktop --------------------------------------------------------------------------------

let desktop = null; // the last status of the selected desktop
let statusFor = null; // the desktop whose status is being fetched

async function refreshStatus(background = false) {
  const id = selected();
  if (statusFor === id) return;
  const entry = desktopEntry(id);
  // See watchQuietly: fetch the status again only when the registry shows another state.
  if (background && watchQuietly(id) && desktop && entry.state === desktop.state) return;
  statusFor = id;
  try {
    const status = await call("GET", desktopPath("/status", id));
    if (id !== selected()) return;
    renderStatus(status);
    auth.ok = true;
    clearMessages(scoped("desktop status", id));
    clearMessages("auth");
  } catch (error) {
    refreshFailed(id, scoped("desktop status", id), error);
  } finally {
    if (statusFor === id) statusFor = null;
  }
}

let autoLive = false;
/** Whether the live view is still to connect by itself, once the desktop is active (set by `init`). */

function renderStatus(status) {
  const previous = desktop;
  desktop = status;
  if (autoLive && status.state === "active") {
    autoLive = false;
    connectLive();
  }
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
  if (previous && previous.state !== status.state) refreshDesktops(); // the list shows the new state at once
  if (!previous || previous.state !== status.state) refreshLists();
}

function renderUptime() {
  const started = desktop && desktop.startedAt && Date.parse(desktop.startedAt);
  $("desktop-uptime").textContent = started ? duration(Date.now() - started) : "–";
}

async function startDesktop(event) {
  event.preventDefault();
  const id = selected();
  await action($("desktop-start"), scoped("start desktop", id), async () => {
    const body = {
      width: positiveInt($("start-width"), "width"),
      height: positiveInt($("start-height"), "height"),
      displayNum: positiveInt($("start-display"), "display"),
    };
    const status = await call("POST", desktopPath("/start", id), { json: body });
    if (id === selected()) renderStatus(status);
  });
}

async function stopDesktop() {
  const id = selected();
  await action($("desktop-stop"), scoped("stop desktop", id), async () => {
    live.disconnect();
    const status = await call("POST", desktopPath("/stop", id));
    if (id === selected()) renderStatus(status);
  });
}

// -- processes ------------------------------------------------------------------------------

let listsBusy = false;

async function refreshLists(background = false) {
  if (listsBusy || !auth.ok) return;
  listsBusy = true;
  try {
    // Recordings are the desktop's: see watchQuietly (Refresh and the recording buttons still load them).
    await Promise.all([refreshProcesses(), background && watchQuietly() ? null : refreshRecordings()]);
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
  const id = selected();
  await action($("screenshot-refresh"), scoped("screenshot", id), async () => {
    const started = performance.now();
    const blob = await call("GET", desktopPath("/screenshot", id), { as: "blob", accept: "image/*" });
    if (id !== selected()) return;
    const img = $("screenshot-img");
    if (screenshotUrl) URL.revokeObjectURL(screenshotUrl);
    screenshotUrl = URL.createObjectURL(blob);
    await new Promise((resolve, reject) => {
      img.onload = resolve;
      img.onerror = () => reject(new Error("the image could not be decoded"));
      img.src = screenshotUrl;
    });
    img.dataset.desktopId = id;
    img.alt = `Screenshot of desktop ${id}`;
    img.hidden = false;
    const ms = Math.round(performance.now() - started);
    $("screenshot-info").textContent =
      `${img.naturalWidth} × ${img.naturalHeight}, ${bytes(blob.size)} ${blob.type}, taken ${new Date().toLocaleTimeString()} in ${ms} ms`;
  });
}

// -- recordings -----------------------------------------------------------------------------

async function refreshRecordings() {
  const id = selected();
  let recordings;
  try {
    recordings = (await call("GET", desktopPath("/recordings", id))).recordings;
  } catch (error) {
    refreshFailed(id, scoped("recordings", id), error);
    return;
  }
  if (id !== selected()) return;
  clearMessages(scoped("recordings", id));
  const rows = recordings.map((r) => {
    const download = element("button", { text: "Download", attrs: { type: "button", "aria-label": `Download ${r.fileName}` } });
    download.addEventListener("click", () => downloadRecording(download, id, r));
    const remove = element("button", { text: "Delete", className: "secondary", attrs: { type: "button", "aria-label": `Delete ${r.id}` } });
    remove.addEventListener("click", () => deleteRecording(remove, id, r));
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
  const id = selected();
  await action($("recording-start"), scoped("start recording", id), async () => {
    const fps = positiveInt($("recording-fps"), "frames per second");
    await call("POST", desktopPath("/recording/start", id), { json: fps === undefined ? {} : { fps } });
    await refreshRecordings();
  });
}

async function stopRecording() {
  const id = selected();
  await action($("recording-stop"), scoped("stop recording", id), async () => {
    await call("POST", desktopPath("/recording/stop", id));
    await refreshRecordings();
  });
}

async function downloadRecording(button, id, recording) {
  // A plain link cannot carry the token, so: fetch with it → blob → object URL → click.
  await action(button, `download ${recording.id}`, async () => {
    const blob = await call("GET", desktopPath(`/recordings/${encodeURIComponent(recording.id)}/download`, id),
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

async function deleteRecording(button, id, recording) {
  await action(button, `delete ${recording.id}`, async () => {
    await call("DELETE", desktopPath(`/recordings/${encodeURIComponent(recording.id)}`, id), { as: "none" });
    await refreshRecordings();
  });
}

// -- live view ------------------------------------------------------------------------------

const STATE_TEXT = {
  idle: "not connected", connecting: "starting the stream…", signalling: "signalling…",
  negotiating: "negotiating…", connected: "connected", disconnected: "disconnected", failed: "failed",
};

const TRANSPORT_TEXT = { webrtc: "WebRTC", websocket: "WebSocket" };

const live = new LiveView($("live-video"), {
  onTransport(mode, reason) {
    const label = $("live-transport");
    label.dataset.transport = mode;
    label.textContent = `${TRANSPORT_TEXT[mode]}: ${reason}`;
  },
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
      $("live-viewers").replaceChildren();
      for (const id of ["live-request-control", "live-take-control", "live-release-control", "live-give"]) {
        $(id).hidden = true;
      }
    }
  },
  onError: (text) => showMessage(text),
  onStats(stats, video) {
    const parts = [`${video.videoWidth}×${video.videoHeight}`, `${stats.fps.toFixed(1)} fps`, `${Math.round(stats.kbps)} kbit/s`];
    if (stats.codec) parts.push(stats.codec.replace("video/", ""));
    if (stats.rttMs !== null) parts.push(`input RTT ${Math.round(stats.rttMs)} ms`);
    $("live-stats").textContent = parts.join(" · ");
  },
  onControl: renderControl,
  onClipboard(text, error) {
    if (error) showMessage(`clipboard: ${error}`);
    else $("live-clipboard").textContent = `clipboard synced (${[...text].length} characters)`;
  },
}, { canvas: $("live-canvas") });

/** Who watches, who holds control, and the buttons this viewer may use (docs/control.md). */
function renderControl({ me, host, takeover, sessions, admin, canHost }) {
  const mine = host !== null && host === me;
  const held = takeover.active ? " (agent input is held off)" : "";
  $("live-control").textContent = mine ? `You have control${held}`
    : host ? `${host} has control${held}: your input is ignored` : "Nobody has control: you watch";
  $("live-viewers").replaceChildren(...sessions.map((s) => {
    const item = document.createElement("li");
    item.dataset.viewer = s.id;
    item.dataset.role = s.role;
    if (s.id === me) item.dataset.me = "";
    item.textContent = `${s.id}${s.id === me ? " (you)" : ""}: ${s.role}${s.access === "view" ? ", view only" : ""}`;
    return item;
  }));
  const request = $("live-request-control");
  request.hidden = mine || !canHost || (host !== null && admin);
  request.textContent = host === null ? "Take control" : "Request control";
  const take = $("live-take-control");
  take.hidden = !admin || host === null || mine;
  take.textContent = host ? `Take control from ${host}` : "Take control";
  $("live-release-control").hidden = !mine;
  const others = sessions.filter((s) => s.id !== host && s.id !== me && s.access !== "view");
  $("live-give").hidden = !(mine || admin) || others.length === 0;
  const select = $("live-give-to");
  const chosen = select.value;
  select.replaceChildren(...others.map((s) => new Option(s.id, s.id)));
  if (others.some((s) => s.id === chosen)) select.value = chosen;
}

async function connectLive() {
  await action(null, scoped("live view"), async () => {
    live.name = $("live-name").value.trim();
    sessionStorage.setItem("liveName", live.name);
    live.transport = $("live-transport-choice").value;
    try {
      await live.connect();
    } catch (error) {
      live.disconnect("failed");
      throw error;
    }
  });
}

async function stopStreaming() {
  const id = selected();
  await action($("stream-stop"), scoped("stop streaming", id), async () => {
    live.disconnect();
    await call("POST", desktopPath("/stream/stop", id));
  });
}

// -- wiring ---------------------------------------------------------------------------------

function useToken(value) {
  token.set(value);
  auth.ok = true;
  $("token-input").value = "";
  $("token-input").placeholder = value ? "token set (enter another to replace it)" : "the server's --token";
  if (onWall()) return; // the wall's socket brings what it shows (a desktop's token may not list the desktops)
  refreshDesktops();
  refreshStatus();
  refreshLists();
}

/** The address says `#wall`: the wall (wall.js) shows instead of the panels, which then rest. */
function onWall() {
  return new URLSearchParams(location.hash.replace(/^#/, "")).has("wall");
}

async function poll() {
  await refreshDesktops(true); // first: the status poll reads the selected desktop's entry
  await refreshStatus(true);
}

function onHashChange() {
  const tokenGiven = token.adoptFromHash();
  if (onWall()) {
    live.disconnect(); // the wall shows instead: the panels and their live view rest until the address leaves it
    return;
  }
  const wanted = desktopSelection.fromHash();
  // `#token=…` alone names no desktop: keep the one shown (and put it back into the address).
  if (wanted === null && tokenGiven) desktopSelection.set(selected());
  else showDesktop(wanted ?? DEFAULT_DESKTOP);
  if (tokenGiven) useToken(token.get());
  // `#live` connects at once here too: the wall (wall.js) opens a desktop's live view so.
  const wantsLive = new URLSearchParams(location.hash.replace(/^#/, "")).has("live");
  if (wantsLive && token.get() && ["idle", "disconnected", "failed"].includes(live.state)) connectLive();
}

function init() {
  token.adoptFromHash();
  desktopSelection.set(desktopSelection.fromHash() ?? DEFAULT_DESKTOP);
  initDesktops({
    onSelect: showDesktop,
    onGone: desktopGone,
    onChange: (id) => id === selected() && refreshStatus(),
    onList: renderQuietNote,
  });
  resetPanels();
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
  $("recordings-refresh").addEventListener("click",
    () => action($("recordings-refresh"), scoped("recordings"), refreshRecordings));
  $("live-connect").addEventListener("click", connectLive);
  $("live-disconnect").addEventListener("click", () => live.disconnect());
  $("live-name").value = sessionStorage.getItem("liveName") || "";
  // `#transport=websocket` (or webrtc, auto) picks the live view's transport; `#live` connects at once.
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  if (TRANSPORTS.includes(params.get("transport"))) $("live-transport-choice").value = params.get("transport");
  $("live-request-control").addEventListener("click", () => {
    live.requestControl();
    $("live-video").focus({ preventScroll: true });
  });
  $("live-take-control").addEventListener("click", () => live.takeControl());
  $("live-release-control").addEventListener("click", () => live.releaseControl());
  $("live-give-control").addEventListener("click", () => live.giveControl($("live-give-to").value));
  $("live-clipboard-sync").addEventListener("change", (event) => live.setClipboardSync(event.target.checked));
  if (!window.isSecureContext || !navigator.clipboard) {
    // The clipboard API exists only on https:// and localhost pages (docs/control.md, "Clipboard").
    $("live-clipboard-sync").disabled = true;
    $("live-clipboard").textContent = "clipboard sync needs an https:// or localhost address";
  }
  $("stream-stop").addEventListener("click", stopStreaming);
  window.addEventListener("hashchange", onHashChange);
  // Polls skip while the tab is hidden or shows the wall (wall.js: its socket brings the desktops); errors of
  // background polls are shown like any other.
  const away = () => document.hidden || onWall() || !auth.ok;
  setInterval(() => away() || poll(), STATUS_POLL_MS);
  setInterval(() => away() || refreshLists(true), LISTS_POLL_MS);
  setInterval(() => {
    renderUptime();
    tickDesktops();
  }, 1000);
  // For debugging from the console (and the tests).
  window.inspector = { live, poll, refreshStatus, refreshLists, refreshDesktops, showDesktop };
  // Opened with a token, the page connects the live view by itself: at once with `#live`, else as soon as the
  // desktop shows active; `#live=0` leaves it to the Connect button (docs/inspector.md).
  const liveAsked = takeFromHash("live");
  if (liveAsked !== null && liveAsked !== "0" && token.get()) connectLive();
  else autoLive = token.get() !== "" && liveAsked !== "0" && !params.has("wall");
}

init();
