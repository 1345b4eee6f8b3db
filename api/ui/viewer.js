// The embeddable live view (docs/streaming.md, "Embedding the live view"): one module script the server
// serves at /ui/viewer.js, defining <sandbox-desktop-view>. It is the inspector's viewer (stream.js) with
// its own server, token and desktop instead of the inspector's:
//
//   <script type="module" src="http://HOST:PORT/ui/viewer.js"></script>
//   <sandbox-desktop-view src="http://HOST:PORT" token="TOKEN" desktop="default" transport="auto" control>
//   </sandbox-desktop-view>
//
// Attributes: `src` the server (default: where this script came from); `token` (default: `#token=` of the
// page's address); `desktop` (default `default`); `transport` auto | webrtc | websocket (default: `#transport=`
// of the page's address, else auto: WebRTC first, the WebSocket when ICE has not connected within 2 s);
// `control` asks for control at once; `sound` plays the desktop's sound (from the first click on the view:
// browsers start sound only after a gesture); `name` the viewer's name. A small label says which transport is used
// and why. Events: `statechange` (detail {state, detail, transport, reason}).

import { LiveView, TRANSPORTS } from "./stream.js";

const STYLE = `
  :host { display: block; position: relative; background: #11151c; aspect-ratio: 16 / 10; }
  video, canvas { display: block; width: 100%; height: 100%; object-fit: contain; cursor: crosshair; }
  video[hidden], canvas[hidden] { display: none; }
  video:focus, canvas:focus { outline: 2px solid #5b9dff; outline-offset: -2px; }
  .label { position: absolute; left: 0.4rem; bottom: 0.4rem; padding: 0.1rem 0.4rem; border-radius: 0.3rem;
           font: 12px system-ui, sans-serif; color: #e8ecf2; background: rgba(0, 0, 0, 0.55); pointer-events: none; }
`;
const TRANSPORT_TEXT = { webrtc: "WebRTC", websocket: "WebSocket" };

function hashParam(name) {
  return new URLSearchParams(location.hash.replace(/^#/, "")).get(name);
}

/** Paths, calls and socket URLs of one server and desktop, with one token (what stream.js asks of a server). */
export function endpointOf(src, token, desktop = "default") {
  const base = new URL(src, location.href);
  const prefix = desktop === "default" ? "/v1/desktop" : `/v1/desktops/${encodeURIComponent(desktop)}`;
  return {
    path: (rest) => prefix + rest,
    async call(method, path) {
      const response = await fetch(new URL(path, base), {
        method, headers: token ? { Authorization: `Bearer ${token}`, Accept: "application/json" } : {},
      });
      if (!response.ok) throw new Error(`${method} ${path}: HTTP ${response.status} ${await response.text()}`);
      return response.json();
    },
    socketUrl(path) {
      const url = new URL(path, base);
      url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
      if (token) url.searchParams.set("access_token", token);
      return url.toString();
    },
  };
}

export class SandboxDesktopView extends HTMLElement {
  connectedCallback() {
    if (this.live) return;
    const root = this.shadowRoot || this.attachShadow({ mode: "open" });
    const sheet = new CSSStyleSheet(); // not a <style> element: the inspector's CSP allows no inline style
    sheet.replaceSync(STYLE);
    root.adoptedStyleSheets = [sheet];
    const video = Object.assign(document.createElement("video"), { muted: true, autoplay: true, playsInline: true, tabIndex: 0 });
    video.muted = !this.hasAttribute("sound");
    // A click is the gesture browsers want before they play sound (WebRTC's <video>, the socket's AudioContext).
    this.addEventListener("pointerdown", () => video.muted || void video.play().catch(() => undefined));
    const canvas = Object.assign(document.createElement("canvas"), { hidden: true, tabIndex: 0 });
    const label = Object.assign(document.createElement("span"), { className: "label" });
    label.setAttribute("part", "label");
    root.replaceChildren(video, canvas, label);
    this.label = label;
    this.transportText = "";
    const src = this.getAttribute("src") || new URL(import.meta.url).origin;
    const token = this.getAttribute("token") ?? hashParam("token") ?? "";
    const endpoint = endpointOf(src, token, this.getAttribute("desktop") || "default");
    let asked = false;
    this.live = new LiveView(video, {
      onState: (state, detail) => {
        this.state = state;
        this.render(detail);
        this.dispatchEvent(new CustomEvent("statechange", {
          detail: { state, detail, transport: this.live?.mode ?? null, reason: this.live?.reason ?? "" },
        }));
      },
      onTransport: (mode, reason) => {
        this.transportText = `${TRANSPORT_TEXT[mode]}: ${reason}`;
        this.dataset.transport = mode;
        asked = false; // a new session: ask for control again if told to
        this.render();
      },
      onControl: () => {
        if (this.hasAttribute("control") && !asked) {
          asked = true;
          this.live.requestControl();
        }
      },
      onError: (message) => console.warn(`sandbox-desktop-view: ${message}`),
      onStats: () => undefined,
      onClipboard: () => undefined,
    }, { canvas, endpoint });
    const transport = this.getAttribute("transport") || hashParam("transport") || "auto";
    this.live.transport = TRANSPORTS.includes(transport) ? transport : "auto";
    this.live.name = this.getAttribute("name") || "";
    this.live.connect().catch((error) => {
      this.live.disconnect("failed");
      this.render(error.message);
    });
  }

  disconnectedCallback() {
    this.live?.disconnect();
    this.live = null;
  }

  render(detail = "") {
    const state = this.state && this.state !== "connected" ? ` (${this.state}${detail ? `: ${detail}` : ""})` : "";
    this.label.textContent = `${this.transportText}${state}`;
    this.dataset.state = this.state || "";
  }
}

if (!customElements.get("sandbox-desktop-view")) customElements.define("sandbox-desktop-view", SandboxDesktopView);
