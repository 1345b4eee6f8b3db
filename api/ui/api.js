// Talking to the server: the token, which desktop the page shows, fetch with `Authorization: Bearer`,
// problem+json → ApiError.

const TOKEN_KEY = "sandbox-desktop.token";
const DESKTOP_PARAM = "desktop";

/** The desktop served at `/v1/desktop/...` (docs/desktops.md); the page shows it unless told otherwise. */
export const DEFAULT_DESKTOP = "default";

/** An API call that failed: an HTTP error (with its problem+json document, if any) or no answer. */
export class ApiError extends Error {
  constructor(message, { status = 0, problem = null } = {}) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.problem = problem;
  }
}

function hashParams() {
  return new URLSearchParams(location.hash.replace(/^#/, ""));
}

/** Rewrite the fragment in place: no history entry, and no `hashchange` event. */
function replaceHash(params) {
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + location.search + (rest ? `#${rest}` : ""));
}

/** The value of `#name=` in the address, taken out of it (a one-time instruction, such as `#live`); null when
 * the address has none. */
export function takeFromHash(name) {
  const params = hashParams();
  const value = params.get(name);
  if (value === null) return null;
  params.delete(name);
  replaceHash(params);
  return value;
}

/** The token for this tab: `#token=…` in the address wins (and is then removed from it). */
export const token = {
  get() {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  },
  set(value) {
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
  },
  adoptFromHash() {
    const params = hashParams();
    const given = params.get("token");
    if (given === null) return false;
    this.set(given);
    params.delete("token");
    // Keep the token out of the visible address (and out of screenshots and history).
    replaceHash(params);
    return true;
  },
};

let selected = DEFAULT_DESKTOP;

/**
 * Which desktop the panels show. It lives in the address as `#desktop=ID` (unlike the token, it
 * is no secret), so a reload or a shared link shows the same desktop; no parameter means `default`.
 */
export const desktopSelection = {
  get() {
    return selected;
  },
  set(id) {
    selected = id || DEFAULT_DESKTOP;
    const params = hashParams();
    if (selected === DEFAULT_DESKTOP) params.delete(DESKTOP_PARAM);
    else params.set(DESKTOP_PARAM, selected);
    replaceHash(params);
    return selected;
  },
  /** The desktop `#desktop=` names, or null when the address names none. */
  fromHash() {
    return hashParams().get(DESKTOP_PARAM) || null;
  },
};

/**
 * The one place a path of the per-desktop API is built: `/v1/desktop<rest>` for `default`,
 * `/v1/desktops/{id}<rest>` for any other (docs/desktops.md). Every panel goes through it, so
 * selecting a desktop points them all at it. `rest` starts with "/" (`/status`, `/screenshot`).
 */
export function desktopPath(rest, id = selected) {
  const base = id === DEFAULT_DESKTOP ? "/v1/desktop" : `/v1/desktops/${encodeURIComponent(id)}`;
  return base + rest;
}

/** The registry of desktops: `/v1/desktops`, one desktop's resource, or an action on it (`pause`). */
export function registryPath(id, verb) {
  if (id === undefined) return "/v1/desktops";
  const one = `/v1/desktops/${encodeURIComponent(id)}`;
  return verb ? `${one}/${verb}` : one;
}

function headers(extra = {}) {
  const value = token.get();
  return value ? { Authorization: `Bearer ${value}`, ...extra } : { ...extra };
}

function withQuery(path, query) {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== null) params.set(key, String(value));
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

/** A readable one-line message from a problem document (RFC 7807 plus this server's members). */
export function describeProblem(problem, status) {
  const parts = [`${problem.title || "Error"} (${problem.status || status})`];
  if (problem.detail) parts.push(problem.detail);
  const message = problem.details && problem.details.message;
  if (message && !String(problem.detail || "").includes(message)) parts.push(message);
  if (Array.isArray(problem.missingDependencies) && problem.missingDependencies.length) {
    parts.push(`missing: ${problem.missingDependencies.join(", ")}`);
  }
  if (problem.installCommand) parts.push(`install with: ${problem.installCommand}`);
  return parts.join(" — ");
}

async function failure(response) {
  const type = response.headers.get("content-type") || "";
  const text = await response.text().catch(() => "");
  if (type.includes("json")) {
    try {
      const problem = JSON.parse(text);
      return new ApiError(describeProblem(problem, response.status), { status: response.status, problem });
    } catch {
      // fall through: a body that is not the JSON it claims to be
    }
  }
  const detail = text.trim().slice(0, 300) || response.statusText;
  return new ApiError(`HTTP ${response.status}: ${detail}`, { status: response.status });
}

/**
 * One API call. `json` is sent as the body (with its content type); the answer is parsed as
 * JSON unless `as` is "blob" (binary) or "none" (204 and the like).
 */
export async function call(method, path, { json, query, as = "json", accept } = {}) {
  const init = { method, headers: headers(accept ? { Accept: accept } : { Accept: "application/json" }) };
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  }
  let response;
  try {
    response = await fetch(withQuery(path, query), init);
  } catch (error) {
    throw new ApiError(`cannot reach the server (${error.message}); is it still running?`);
  }
  if (!response.ok) throw await failure(response);
  if (as === "blob") return response.blob();
  if (as === "none" || response.status === 204) return null;
  return response.json();
}

/** The signalling WebSocket URL: browsers cannot set headers there, so the token goes in the query. */
export function socketUrl(path) {
  const url = new URL(path, location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  const value = token.get();
  if (value) url.searchParams.set("access_token", value);
  return url.toString();
}

/** base64 log data → text (UTF-8, invalid bytes replaced). */
export function decodeBase64(data) {
  const binary = atob(data || "");
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  return new TextDecoder("utf-8", { fatal: false }).decode(bytes);
}
