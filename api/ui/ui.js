// What every panel of the page shares: the message list, button actions, formatting, elements.

import { ApiError } from "./api.js";

const MAX_MESSAGES = 6;

export const $ = (id) => document.getElementById(id);

/** `auth.ok` is false after a 401: polling pauses until another token is given. */
export const auth = { ok: true };

// -- messages -------------------------------------------------------------------------------

export function showMessage(text, kind = "error", context = "") {
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
export function clearMessages(context) {
  for (const item of [...$("messages").children]) {
    if (item.dataset.context === context) item.remove();
  }
}

export function reportError(context, error) {
  if (error instanceof ApiError && error.status === 401) {
    // One message for every call the token failed, not one per panel.
    auth.ok = false;
    showMessage("The server refused the API token (401): enter its --token above.", "error", "auth");
    $("token-input").focus();
    return;
  }
  const text = error instanceof Error ? error.message : String(error);
  showMessage(`${context}: ${text}`, "error", context);
}

/** Run an action from a button: disabled while it runs, errors shown. */
export async function action(button, context, work) {
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

// -- formatting and input -------------------------------------------------------------------

export function duration(ms) {
  let s = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  const pad = (n) => String(n).padStart(2, "0");
  return h ? `${h}h ${pad(m)}m ${pad(s)}s` : m ? `${m}m ${pad(s)}s` : `${s}s`;
}

export function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export function element(tag, { text, className, attrs } = {}, ...children) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  node.append(...children);
  return node;
}

export function positiveInt(input, name) {
  const text = input.value.trim();
  if (text === "") return undefined;
  const value = Number(text);
  // Sent as typed: the server validates ranges and answers with a problem that names the field.
  if (!Number.isInteger(value)) throw new ApiError(`${name} must be a whole number, got "${text}"`);
  return value;
}
