// The wall (`#wall`, docs/inspector.md "Wall"): every desktop the token may see as a tile with its live thumbnail,
// state, tags and pending approvals, over one WebSocket (`/v1/wall/ws`: the tiles as JSON text, each desktop's JPEG
// as a binary message of its id's length, its id and the picture). Clicking a tile opens its live view full size;
// approvals are decided on the tile. The socket is open only while the wall is shown: nobody watching, the server
// encodes no thumbnail.

import { call, socketUrl } from "./api.js";
import { element as el } from "./ui.js";

const SOCKET_PATH = "/v1/wall/ws";
const RECONNECT_MIN_MS = 1000;
const RECONNECT_MAX_MS = 15000;
const DECIDER = "inspector wall";

let socket = null;
let retryMs = RECONNECT_MIN_MS;
let retryTimer = null;
let canDecide = false;
/** Desktop id → its tile element. */
const tiles = new Map();
/** Desktop id → the object URL its <img> shows (revoked when replaced). */
const pictures = new Map();

const wanted = () => new URLSearchParams(location.hash.replace(/^#/, "")).has("wall");

// -- mounting ---------------------------------------------------------------------------------

function mount() {
  const main = document.querySelector("main.layout");
  if (!main || document.getElementById("wall")) return false;
  // A stylesheet of its own: the page's Content-Security-Policy allows no inline <style>.
  document.head.append(el("link", { attrs: { rel: "stylesheet", href: "wall.css" } }));
  const close = el("a", { text: "Inspector", className: "button secondary", attrs: { href: "#", id: "wall-close" } });
  const panel = el("section", { className: "panel full", attrs: { id: "wall", "aria-labelledby": "wall-title", hidden: "" } },
    el("div", { className: "panel-head" },
      el("h2", { attrs: { id: "wall-title" }, text: "Wall" }),
      el("div", { className: "actions" }, close)),
    el("p", { className: "muted small", attrs: { id: "wall-state", "aria-live": "polite" }, text: "Not connected." }),
    el("div", { className: "wall-tiles", attrs: { id: "wall-tiles", role: "list" } }));
  main.prepend(panel);
  const open = el("a", { text: "Wall", className: "button secondary", attrs: { href: "#wall", id: "wall-open" } });
  document.querySelector(".topbar")?.append(open);
  window.addEventListener("hashchange", follow);
  document.getElementById("token-form")?.addEventListener("submit", () => setTimeout(() => wanted() && connect(true), 0));
  return true;
}

/** Show the wall while the address says `#wall` (its socket open), the inspector's panels otherwise. */
function follow() {
  const on = wanted();
  document.body.dataset.view = on ? "wall" : "";
  document.getElementById("wall").hidden = !on;
  if (on && !socket) connect(true);
  if (!on) disconnect();
}

function setState(text) {
  document.getElementById("wall-state").textContent = text;
}

// -- the socket -------------------------------------------------------------------------------

function connect(fresh = false) {
  disconnect();
  if (fresh) retryMs = RECONNECT_MIN_MS;
  const ws = new WebSocket(socketUrl(SOCKET_PATH));
  ws.binaryType = "arraybuffer";
  socket = ws;
  ws.onopen = () => {
    retryMs = RECONNECT_MIN_MS;
    setState("Connected.");
  };
  ws.onmessage = (message) => {
    if (typeof message.data === "string") render(JSON.parse(message.data));
    else show(message.data);
  };
  ws.onclose = (event) => {
    if (socket !== ws) return;
    socket = null;
    setState(event.code === 1008 || event.code === 4401 || event.code === 4403
      ? `Refused (${event.reason || event.code}): check the token.` : "Disconnected; reconnecting…");
    retryTimer = setTimeout(() => wanted() && connect(), retryMs);
    retryMs = Math.min(retryMs * 2, RECONNECT_MAX_MS);
  };
}

function disconnect() {
  clearTimeout(retryTimer);
  if (socket) {
    const ws = socket;
    socket = null;
    ws.close();
  }
}

/** A binary message: one byte, the id's length; the id (UTF-8); the JPEG. */
function show(buffer) {
  const bytes = new Uint8Array(buffer);
  const id = new TextDecoder().decode(bytes.subarray(1, 1 + bytes[0]));
  const img = tiles.get(id)?.querySelector("img");
  if (!img) return;
  const url = URL.createObjectURL(new Blob([bytes.subarray(1 + bytes[0])], { type: "image/jpeg" }));
  const previous = pictures.get(id);
  pictures.set(id, url);
  img.onload = () => previous && URL.revokeObjectURL(previous);
  img.src = url;
  img.dataset.pictures = String(Number(img.dataset.pictures || 0) + 1);
}

// -- the tiles --------------------------------------------------------------------------------

function render(message) {
  canDecide = message.canDecide;
  const shown = new Set();
  const list = document.getElementById("wall-tiles");
  for (const desktop of message.desktops) {
    shown.add(desktop.id);
    let tile = tiles.get(desktop.id);
    if (!tile) {
      tile = newTile(desktop.id);
      tiles.set(desktop.id, tile);
    }
    list.append(tile); // in the server's order
    update(tile, desktop);
  }
  for (const [id, tile] of tiles) {
    if (shown.has(id)) continue;
    tile.remove();
    tiles.delete(id);
    if (pictures.has(id)) URL.revokeObjectURL(pictures.get(id));
    pictures.delete(id);
  }
  const count = message.desktops.length;
  setState(message.scope ? `This token sees desktop ${message.scope} only.`
    : `${count} desktop${count === 1 ? "" : "s"}. Click one to watch it full size.`);
}

function newTile(id) {
  const open = el("button", { className: "wall-picture", attrs: { type: "button", "aria-label": `Watch ${id} full size` } },
    el("img", { attrs: { alt: `Desktop ${id}` } }));
  open.addEventListener("click", () => watch(id));
  return el("article", { className: "wall-tile", attrs: { role: "listitem", "data-desktop-id": id } },
    open,
    el("header", {}, el("code", { text: id }), el("span", { className: "badge", attrs: { "data-state": "unknown" } })),
    el("p", { className: "wall-tags small muted" }),
    el("ul", { className: "wall-approvals plain-list" }));
}

function update(tile, desktop) {
  tile.dataset.state = desktop.state;
  const badge = tile.querySelector(".badge");
  badge.dataset.state = desktop.state;
  badge.textContent = desktop.state.replace("_", " ");
  const tags = Object.entries(desktop.tags || {}).map(([k, v]) => `${k}=${v}`);
  tile.querySelector(".wall-tags").textContent = tags.length ? tags.join(" · ") : "no tags";
  const approvals = desktop.approvals || [];
  tile.dataset.approvals = String(approvals.length);
  const list = tile.querySelector(".wall-approvals");
  const known = new Set(approvals.map((a) => a.id));
  for (const item of [...list.children]) if (!known.has(item.dataset.approvalId)) item.remove();
  for (const approval of approvals) {
    if (!list.querySelector(`[data-approval-id="${CSS.escape(approval.id)}"]`)) list.append(approvalItem(approval));
  }
}

function approvalItem(approval) {
  const item = el("li", { className: "wall-approval", attrs: { "data-approval-id": approval.id } },
    el("span", { className: "summary", text: approval.action.summary }));
  if (!canDecide) return item;
  for (const [decision, label, className] of [["approve", "Approve", ""], ["deny", "Deny", "danger"]]) {
    const button = el("button", { text: label, className, attrs: { type: "button", "data-decision": decision } });
    button.addEventListener("click", () => decide(approval.id, decision, item));
    item.append(button);
  }
  return item;
}

async function decide(id, decision, item) {
  for (const button of item.querySelectorAll("button")) button.disabled = true;
  try {
    await call("POST", `/v1/approvals/${encodeURIComponent(id)}`, { json: { decision, by: DECIDER } });
    item.remove(); // the next tile list says so too
  } catch (error) {
    setState(`The decision failed: ${error.message}`);
    for (const button of item.querySelectorAll("button")) button.disabled = false;
  }
}

/** Leave the wall for the inspector's live view of `id`, connected at once (`#live`, app.js). */
function watch(id) {
  location.hash = new URLSearchParams(id === "default" ? { live: "" } : { desktop: id, live: "" }).toString();
}

if (mount()) follow();

// For debugging from the console (and the tests).
window.wall = { tiles, connect, disconnect };
