// The desktops panel (docs/desktops.md): every desktop of the server, with create, pause/resume and
// delete; clicking a desktop's id points every other panel at it (app.js does the switching).
// The list comes from GET /v1/desktops, which does not count as activity for an idle timeout.

import { ApiError, DEFAULT_DESKTOP, call, desktopSelection, registryPath } from "./api.js";
import { $, action, clearMessages, duration, element, positiveInt, reportError, showMessage } from "./ui.js";

const CONFIRM_MS = 5000;

let entries = new Map(); // id → the desktop resource from the newest list
const rows = new Map(); // id → its table row, kept across refreshes so focus and a pending confirmation survive
const deletedHere = new Set(); // ids this page deleted: their disappearance needs no explanation
let pendingDelete = null; // { id, timer }: the first click on Delete arms it, a second one deletes
let asked = 0; // list requests sent
let shown = 0; // the newest list request whose answer is shown (older answers arriving late are dropped)
let inFlight = 0;
let hooks = { onSelect() {}, onGone() {}, onChange() {}, onList() {} };

/** The desktop's resource from the last list, or null. */
export function desktopEntry(id) {
  return entries.get(id) || null;
}

/**
 * `onSelect(id)`: show that desktop in the panels; `onChange(id)`: this page paused or resumed it;
 * `onGone(id, reason)`: the selected one was deleted elsewhere; `onList()`: a new list is shown.
 */
export function initDesktops(callbacks) {
  hooks = { ...hooks, ...callbacks };
  $("desktops-refresh").addEventListener("click", () => refreshDesktops());
  $("desktop-create-form").addEventListener("submit", createDesktop);
}

/** Fetch the list and show it; `background` polls skip while another request is still out. */
export async function refreshDesktops(background = false) {
  if (background && inFlight) return;
  const mine = ++asked;
  inFlight += 1;
  let list;
  try {
    list = (await call("GET", registryPath())).desktops;
    clearMessages("desktops");
  } catch (error) {
    reportError("desktops", error);
    return;
  } finally {
    inFlight -= 1;
  }
  if (mine < shown) return;
  shown = mine;
  entries = new Map(list.map((d) => [d.id, d]));
  render(list);
  hooks.onList();
  const selected = desktopSelection.get();
  if (!entries.has(selected)) await checkGone(selected);
}

/**
 * The selected desktop is not (or no longer) there: find out why (its TTL, its idle timeout,
 * another client), then let the page fall back to the default desktop.
 */
export async function checkGone(id) {
  if (id === DEFAULT_DESKTOP || desktopSelection.get() !== id) return;
  let reason;
  try {
    const gone = await call("GET", registryPath(id));
    if (gone.state !== "deleted") return; // it exists: the list was older than the selection
    reason = `deleted (${gone.endedReason || "no reason given"})`;
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) {
      reportError("desktops", error);
      return;
    }
    reason = "no desktop with this id";
  }
  if (desktopSelection.get() !== id) return;
  if (deletedHere.has(id)) hooks.onSelect(DEFAULT_DESKTOP);
  else hooks.onGone(id, reason);
}

/** Highlight the selected desktop's row (after any change of selection). */
export function markSelected() {
  const selected = desktopSelection.get();
  for (const [id, row] of rows) {
    row.tr.classList.toggle("selected", id === selected);
    row.select.setAttribute("aria-pressed", String(id === selected));
  }
}

/** Once a second: the countdowns to each desktop's TTL and idle timeout. */
export function tickDesktops() {
  const now = Date.now();
  for (const row of rows.values()) renderTimes(row, now);
}

// -- the table ------------------------------------------------------------------------------

function render(list) {
  const body = $("desktop-list");
  for (const child of [...body.children]) if (!child.dataset.desktopId) child.remove(); // "Not loaded yet."
  const listed = new Set();
  list.forEach((d, index) => {
    listed.add(d.id);
    let row = rows.get(d.id);
    if (!row) {
      row = makeRow(d.id);
      rows.set(d.id, row);
    }
    updateRow(row, d);
    // Moving a row that is already in place would take the keyboard focus off its buttons.
    if (body.children[index] !== row.tr) body.insertBefore(row.tr, body.children[index] || null);
  });
  for (const [id, row] of rows) {
    if (!listed.has(id)) {
      row.tr.remove();
      rows.delete(id);
    }
  }
  if (!list.length) {
    body.append(element("tr", {}, element("td", { className: "muted", text: "No desktops.", attrs: { colspan: "7" } })));
  }
  markSelected();
}

function makeRow(id) {
  const button = (text, className, actionName) =>
    element("button", { text, className, attrs: { type: "button", "data-action": actionName } });
  const row = { id, entry: null, busy: false };
  row.select = element("button", { text: id, className: "link", attrs: {
    type: "button", "data-action": "select", "aria-pressed": "false", title: "Show this desktop in the panels below",
  } });
  row.select.addEventListener("click", () => hooks.onSelect(id));
  row.state = element("span", { className: "badge" });
  row.display = element("td");
  row.size = element("td");
  row.tags = element("td", { className: "tags" });
  row.expiry = element("span");
  row.idle = element("span", { className: "muted small" });
  row.toggle = button("Pause", "secondary", "pause");
  row.toggle.addEventListener("click", () => pauseOrResume(row));
  const actions = element("div", { className: "row-actions" }, row.toggle);
  if (id !== DEFAULT_DESKTOP) { // the default desktop is stopped, not deleted (docs/desktops.md)
    row.remove = button("Delete", "danger", "delete");
    row.remove.addEventListener("click", () => deleteClicked(row));
    actions.append(row.remove);
  }
  row.tr = element("tr", { attrs: { "data-desktop-id": id } },
    element("td", {}, row.select),
    element("td", {}, row.state),
    row.display, row.size, row.tags,
    element("td", { className: "times" }, row.expiry, row.idle),
    element("td", {}, actions));
  return row;
}

function updateRow(row, d) {
  row.entry = d;
  row.state.textContent = d.state.replace("_", " ");
  row.state.dataset.state = d.state;
  row.state.title = d.pausedReason || "";
  row.display.textContent = d.display || "–";
  const r = d.resolution;
  row.size.textContent = r ? `${r.width} × ${r.height}` : "–";
  const tags = Object.entries(d.tags || {});
  row.tags.replaceChildren(...tags.map(([k, v]) => element("code", { text: `${k}=${v}` })));
  if (!tags.length) row.tags.textContent = "–";
  const paused = d.state === "paused";
  row.toggle.textContent = paused ? "Resume" : "Pause";
  row.toggle.dataset.action = paused ? "resume" : "pause";
  row.toggle.setAttribute("aria-label", `${paused ? "Resume" : "Pause"} ${d.id}`);
  row.toggle.disabled = row.busy || !(paused || d.state === "active");
  if (row.remove) {
    const armed = pendingDelete?.id === d.id;
    row.remove.textContent = armed ? "Confirm delete" : "Delete";
    row.remove.classList.toggle("armed", armed);
    row.remove.setAttribute("aria-label", armed ? `Click again to delete ${d.id} and everything it runs` : `Delete ${d.id}`);
    row.remove.disabled = row.busy;
  }
  renderTimes(row, Date.now());
}

function renderTimes(row, now) {
  const d = row.entry;
  if (!d) return;
  const expires = d.expiresAt ? Date.parse(d.expiresAt) : null;
  row.expiry.textContent = expires === null ? "–" : expires > now ? `in ${duration(expires - now)}` : "now";
  row.expiry.title = expires === null ? "no TTL" : `TTL ends ${new Date(expires).toLocaleString()}`;
  if (d.idleTimeoutSeconds == null) {
    row.idle.textContent = "";
    return;
  }
  const onIdle = d.onIdle || "delete";
  const due = Date.parse(d.lastActivityAt) + d.idleTimeoutSeconds * 1000;
  const when = d.state === "paused" ? "" : due > now ? ` in ${duration(due - now)}` : " now";
  row.idle.textContent = `idle → ${onIdle}${when}`;
  row.idle.title = `${onIdle} after ${d.idleTimeoutSeconds} s without a request to it`;
}

// -- actions --------------------------------------------------------------------------------

async function pauseOrResume(row) {
  const verb = row.entry.state === "paused" ? "resume" : "pause";
  row.busy = true;
  updateRow(row, row.entry);
  const changed = await action(null, `${verb} ${row.id}`, () => call("POST", registryPath(row.id, verb)));
  row.busy = false;
  if (changed && rows.get(row.id) === row) {
    entries.set(row.id, changed);
    updateRow(row, changed);
  } else {
    updateRow(row, row.entry);
  }
  if (changed) hooks.onChange(row.id);
}

function disarm() {
  if (!pendingDelete) return;
  clearTimeout(pendingDelete.timer);
  const row = rows.get(pendingDelete.id);
  pendingDelete = null;
  if (row) updateRow(row, row.entry);
}

async function deleteClicked(row) {
  // Deleting ends every app of the desktop and removes its HOME, so it takes a second click.
  if (pendingDelete?.id !== row.id) {
    disarm();
    pendingDelete = { id: row.id, timer: setTimeout(disarm, CONFIRM_MS) };
    updateRow(row, row.entry);
    return;
  }
  disarm();
  deletedHere.add(row.id);
  row.busy = true;
  updateRow(row, row.entry);
  const done = await action(null, `delete ${row.id}`, async () => {
    await call("DELETE", registryPath(row.id), { as: "none" });
    return true;
  });
  row.busy = false;
  if (!done) {
    deletedHere.delete(row.id);
    updateRow(row, row.entry);
    return;
  }
  if (desktopSelection.get() === row.id) hooks.onSelect(DEFAULT_DESKTOP);
  await refreshDesktops();
}

/** `key=value` lines → the tags object (blank lines skipped). A value may contain "=", a key may not. */
export function parseTags(text) {
  const tags = new Map();
  text.split("\n").forEach((raw, index) => {
    const line = raw.trim();
    if (!line) return;
    const at = line.indexOf("=");
    if (at <= 0) throw new ApiError(`tags: line ${index + 1} ("${line}") is not key=value`);
    const key = line.slice(0, at).trim();
    if (tags.has(key)) throw new ApiError(`tags: "${key}" is given twice`);
    tags.set(key, line.slice(at + 1).trim());
  });
  return tags.size ? Object.fromEntries(tags) : undefined;
}

async function createDesktop(event) {
  event.preventDefault();
  await action($("desktop-create"), "create desktop", async () => {
    const idle = positiveInt($("create-idle"), "idle timeout");
    const body = {
      width: positiveInt($("create-width"), "width"),
      height: positiveInt($("create-height"), "height"),
      tags: parseTags($("create-tags").value),
      ttlSeconds: positiveInt($("create-ttl"), "TTL"),
      idleTimeoutSeconds: idle,
      onIdle: idle === undefined ? undefined : $("create-on-idle").value,
    };
    const created = await call("POST", registryPath(), { json: body });
    const r = created.resolution;
    clearMessages("created desktop");
    showMessage(`created ${created.id} on ${created.display}${r ? ` (${r.width} × ${r.height})` : ""}: ` +
      "click its id in the list to show it", "info", "created desktop");
    await refreshDesktops();
  });
}
