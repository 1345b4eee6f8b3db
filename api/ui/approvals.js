// Pending agent actions a person approves or denies (docs/approvals.md): a panel after the live view listing the
// shown desktop's pending approvals as they come and go (its events WebSocket, `approval.` types), and each pending
// action drawn on the live view: a marker where a click would land, the text that would be typed, the keys.

import { ApiError, call, desktopPath, desktopSelection, socketUrl } from "./api.js";

const RECONNECT_MIN_MS = 1000;
const RECONNECT_MAX_MS = 30000;
const DECIDER = "inspector";
const SHOWN_TEXT = 120;

/** The shown desktop's pending approvals by id, as the server lists them. */
const pending = new Map();
let desktopId = desktopSelection.get();
let socket = null;
let retryMs = RECONNECT_MIN_MS;
let retryTimer = null;
let generation = 0;
/** False with a desktop's token: it sees the approval events of its desktop, but only the server token decides. */
let canDecide = true;

function el(tag, { text, className, attrs } = {}, ...children) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  node.append(...children);
  return node;
}

// -- mounting ---------------------------------------------------------------------------------

function mount() {
  const live = document.getElementById("live");
  if (!live || document.getElementById("approvals")) return false;
  // A stylesheet of its own: the page's Content-Security-Policy allows no inline <style>.
  document.head.append(el("link", { attrs: { rel: "stylesheet", href: "approvals.css" } }));
  const panel = el("section", { className: "panel", attrs: { id: "approvals", "aria-labelledby": "approvals-title" } },
    el("div", { className: "panel-head" },
      el("h2", { attrs: { id: "approvals-title" } }, "Approvals ",
        el("code", { className: "desktop-label", text: desktopId, attrs: { "data-approvals-desktop": "" } }))),
    el("p", { className: "muted small", attrs: { id: "approvals-state", "aria-live": "polite" }, text: "Not connected." }),
    el("ul", { className: "plain-list", attrs: { id: "approval-list", "aria-live": "polite" } }));
  live.after(panel);
  const frame = live.querySelector(".video-frame");
  if (frame) {
    frame.append(el("div", { attrs: { id: "approvals-overlay", "aria-hidden": "true" } }));
    new ResizeObserver(drawOverlay).observe(frame);
    const video = document.getElementById("live-video");
    video?.addEventListener("loadedmetadata", drawOverlay);
    video?.addEventListener("resize", drawOverlay);
  }
  // The page shows another desktop: its label changes (app.js), and so do the approvals shown.
  const label = document.querySelector("#live-title [data-selected-desktop]");
  if (label) new MutationObserver(() => follow(desktopSelection.get())).observe(label, { childList: true, characterData: true, subtree: true });
  document.getElementById("token-form")?.addEventListener("submit", () => setTimeout(() => connect(true), 0));
  return true;
}

// -- following the desktop's approvals --------------------------------------------------------

function follow(id) {
  if (id === desktopId && socket) return;
  desktopId = id;
  for (const label of document.querySelectorAll("[data-approvals-desktop]")) label.textContent = id;
  connect(true);
}

function setState(text) {
  const state = document.getElementById("approvals-state");
  if (state) state.textContent = text;
}

function connect(fresh = false) {
  generation += 1;
  const mine = generation;
  clearTimeout(retryTimer);
  if (socket) {
    socket.onclose = null;
    socket.close();
    socket = null;
  }
  if (fresh) {
    retryMs = RECONNECT_MIN_MS;
    pending.clear();
    render();
  }
  const ws = new WebSocket(socketUrl(desktopPath("/events/ws", desktopId) + "?types=approval."));
  socket = ws;
  ws.onopen = () => {
    retryMs = RECONNECT_MIN_MS;
    load(mine); // after subscribing: nothing requested in between is missed
  };
  ws.onmessage = (message) => mine === generation && onEvent(JSON.parse(message.data));
  ws.onclose = () => {
    if (mine !== generation) return;
    socket = null;
    setState("Disconnected from the desktop's events; reconnecting…");
    retryTimer = setTimeout(() => connect(), retryMs);
    retryMs = Math.min(retryMs * 2, RECONNECT_MAX_MS);
  };
}

async function load(mine) {
  try {
    const answer = await call("GET", "/v1/approvals", { query: { status: "pending", desktopId } });
    if (mine !== generation) return;
    canDecide = true;
    for (const approval of answer.approvals) pending.set(approval.id, approval);
    render();
  } catch (error) {
    if (mine !== generation) return;
    if (error instanceof ApiError && (error.status === 403 || error.status === 401)) {
      canDecide = false;
      render();
      setState("Approvals are decided with the server's token (a desktop's token cannot list or decide them).");
    } else {
      setState(`Cannot list approvals: ${error.message}`);
    }
  }
}

function onEvent(event) {
  if (event.type === "approval.requested" && event.status === "pending") {
    pending.set(event.id, event);
  } else if (event.type === "approval.decided") {
    pending.delete(event.id);
  } else {
    return;
  }
  render();
}

// -- deciding ---------------------------------------------------------------------------------

async function decide(id, decision, form) {
  const message = form.elements.message.value.trim() || undefined;
  for (const button of form.querySelectorAll("button")) button.disabled = true;
  try {
    await call("POST", `/v1/approvals/${encodeURIComponent(id)}`, { json: { decision, message, by: DECIDER } });
    pending.delete(id);
  } catch (error) {
    if (error instanceof ApiError && (error.status === 409 || error.status === 404)) pending.delete(id);
    else setState(`The decision failed: ${error.message}`);
  }
  render();
}

// -- drawing ----------------------------------------------------------------------------------

function typedText(step) {
  const text = step.text || "";
  const shown = text.length > SHOWN_TEXT ? `${text.slice(0, SHOWN_TEXT)}…` : text;
  const more = step.textLength > text.length ? ` (${step.textLength} characters)` : "";
  return JSON.stringify(shown) + more;
}

function stepLine(step) {
  if (step.type === "type" || step.type === "setValue") return `${step.type} ${typedText(step)}`;
  if (step.keys && step.kind === "key") return `press ${step.keys}`;
  return null;
}

function item(approval) {
  const action = approval.action;
  const form = el("form", { attrs: { "aria-label": `Decide on ${action.summary}` } },
    el("input", { attrs: { name: "message", type: "text", maxlength: "2000", placeholder: "Message to the agent (optional)",
      "aria-label": "Message to the agent" } }),
    el("button", { text: "Approve", attrs: { type: "submit", "data-decision": "approve" } }),
    el("button", { text: "Deny", className: "danger", attrs: { type: "button", "data-decision": "deny" } }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    decide(approval.id, "approve", form);
  });
  form.querySelector("[data-decision=deny]").addEventListener("click", () => decide(approval.id, "deny", form));
  const lines = action.steps.map(stepLine).filter(Boolean);
  return el("li", { className: "approval", attrs: { "data-approval-id": approval.id } },
    el("header", {},
      el("span", { className: "summary", text: action.summary }),
      el("span", { className: "muted small", text: `${approval.source} · ${action.operation} · ${action.kinds.join(", ")}` })),
    ...(lines.length ? [el("pre", { text: lines.join("\n") })] : []),
    canDecide ? form : el("p", { className: "muted small", text: "Decided with the server's token." }));
}

function render() {
  const list = document.getElementById("approval-list");
  if (!list) return;
  const shown = [...pending.values()].filter((a) => a.desktopId === desktopId);
  list.replaceChildren(...shown.map(item));
  if (canDecide) {
    setState(shown.length ? `${shown.length} action${shown.length > 1 ? "s" : ""} waiting for a decision.`
      : "No agent action is waiting for approval.");
  }
  drawOverlay();
}

/** Where a screen pixel of a `screen`-sized desktop shows inside the video's box (letterboxed, object-fit: contain). */
function place(video, screen, x, y) {
  const box = { width: video.clientWidth, height: video.clientHeight };
  const vw = video.videoWidth || screen.width;
  const vh = video.videoHeight || screen.height;
  const scale = Math.min(box.width / vw, box.height / vh);
  const left = (box.width - vw * scale) / 2 + video.offsetLeft;
  const top = (box.height - vh * scale) / 2 + video.offsetTop;
  return { left: left + ((x + 0.5) * vw / screen.width) * scale, top: top + ((y + 0.5) * vh / screen.height) * scale };
}

function marker(overlay, video, screen, approvalId, x, y, label) {
  const at = place(video, screen, x, y);
  const style = { left: `${at.left}px`, top: `${at.top}px` };
  const dot = el("div", { className: "marker", attrs: { "data-approval-id": approvalId, "data-x": x, "data-y": y } });
  const text = el("div", { className: "label", text: label, attrs: { "data-approval-id": approvalId } });
  Object.assign(dot.style, style);
  Object.assign(text.style, style);
  overlay.append(dot, text);
}

function drawOverlay() {
  const overlay = document.getElementById("approvals-overlay");
  const video = document.getElementById("live-video");
  if (!overlay || !video) return;
  overlay.replaceChildren();
  const typed = [];
  for (const approval of pending.values()) {
    const screen = approval.action.screen;
    if (approval.desktopId !== desktopId) continue;
    for (const step of approval.action.steps) {
      if (screen && step.x != null && step.y != null) {
        const label = step.type === "drag" ? "drag from" : `${step.type}${step.button && step.button !== "left" ? ` ${step.button}` : ""}`;
        marker(overlay, video, screen, approval.id, step.x, step.y, label);
        if (step.endX != null && step.endY != null) marker(overlay, video, screen, approval.id, step.endX, step.endY, "drag to");
      }
      const line = stepLine(step);
      if (line) typed.push(line);
    }
  }
  if (typed.length) overlay.append(el("div", { className: "typed", text: typed.join("\n"), attrs: { "data-typed": "" } }));
}

if (mount()) connect(true);

// For debugging from the console (and the tests).
window.approvals = { pending, connect, drawOverlay };
