// The live view: neko's signalling over the WebSocket, WebRTC video, input on the data channel.
// Speaks the reference SDK's side (docs/streaming.md): the server offers, we answer. Unlike the SDK it
// joins as a watcher and asks for control only when the person says so (docs/control.md); the
// controller's browser clipboard and the desktop's are kept in step over the same socket.
//
// Where UDP does not get through, the same session runs over one WebSocket on the server's port
// (`/stream/ws`): video on a <canvas> (socket_media.js), input as the same binary frames on the socket.
// `transport` "auto" tries WebRTC and falls back when ICE has not connected within ICE_TIMEOUT_MS.

import { call, desktopPath, socketUrl } from "./api.js";
import { InputCapture, encode, pongRoundTrip } from "./input.js";
import { KIND, SocketMedia, SocketSound, decodesH264, decodesOpus, parseMessage } from "./socket_media.js";

const PING_INTERVAL_MS = 2000;
const STATS_INTERVAL_MS = 1000;
export const ICE_TIMEOUT_MS = 2000;
const ICE_TIMEOUT_WITH_RELAYS_MS = 5000; // TURN allocations take round trips of their own (docs/streaming-turn.md)
export const TRANSPORTS = ["auto", "webrtc", "websocket"];

/** The inspector's server: its token and its selected desktop (api.js). An embedded viewer brings its own. */
const INSPECTOR_ENDPOINT = { call, path: (rest) => desktopPath(rest), socketUrl };

/**
 * One viewer. Callbacks: onState(state, detail) with state in idle | connecting | signalling |
 * negotiating | connected | disconnected | failed; onError(message); onStats(stats); onControl(control)
 * with control = {me, host, takeover, sessions: [{id, role, access}], admin, canHost}; onClipboard(text, error).
 */
export class LiveView {
  constructor(video, callbacks, { canvas = null, endpoint = INSPECTOR_ENDPOINT } = {}) {
    this.video = video;
    this.canvas = canvas; // where the WebSocket transport draws (no canvas: WebRTC only)
    this.callbacks = callbacks;
    this.endpoint = endpoint;
    this.transport = "auto"; // asked for: auto | webrtc | websocket
    this.videoFormat = null; // the WebSocket transport's video: null picks h264 when WebCodecs decodes it, else jpeg
    this.mode = null; // in use: webrtc | websocket
    this.reason = "";
    this.media = null;
    this.sound = null;
    this.iceTimer = null;
    this.resumeSound = () => this.sound?.resume(); // the sound toggle's click is the gesture an AudioContext needs
    this.ws = null;
    this.pc = null;
    this.channel = null;
    this.input = null;
    this.sessionId = null;
    this.screen = null;
    this.pendingCandidates = [];
    this.timers = [];
    this.timings = {};
    this.stats = { fps: 0, kbps: 0, rttMs: null, framesDecoded: 0, codec: "" };
    this.previousSample = null;
    this.state = "idle";
    this.name = "";
    this.sessions = new Map(); // id → neko's session entry, with our `role` and `access`
    this.host = null;
    this.takeover = { active: false, mode: "refuse" };
    this.clipboardSync = false;
    this.clipboardText = null; // what the browser and the desktop last agreed on: never sent back
    this.onWindowFocus = () => this.pushClipboard();
  }

  /**
   * Start the stream if it is off (the reference viewer leaves that to its host app), then connect.
   * The desktop is the one selected now: a later selection disconnects this viewer, never moves it.
   */
  async connect() {
    this.disconnect();
    const { call: request, path } = this.endpoint;
    this.timings = { start: performance.now() };
    this.setState("connecting");
    const status = await request("GET", path("/stream/status"));
    if (this.state !== "connecting") return; // disconnected (or another desktop selected) meanwhile
    if (!status.active) await request("POST", path("/stream/start"));
    if (this.state !== "connecting") return;
    if (this.transport === "websocket") {
      this.openSocket("websocket", "asked for");
    } else if (this.transport === "auto" && this.canvas && !window.RTCPeerConnection) {
      this.openSocket("websocket", "this browser has no WebRTC");
    } else {
      this.openSocket("webrtc", this.transport === "webrtc" ? "asked for" : "tried first");
    }
  }

  /** Open the viewer socket of `mode` (WebRTC's signalling, or the WebSocket transport) and say why. */
  openSocket(mode, reason) {
    this.mode = mode;
    this.reason = reason;
    this.callbacks.onTransport?.(mode, reason);
    const url = new URL(this.endpoint.socketUrl(this.endpoint.path(mode === "websocket" ? "/stream/ws" : "/stream/signaling")));
    if (this.name) url.searchParams.set("name", this.name);
    const ws = new WebSocket(url.toString());
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    let initialised = false;
    ws.onopen = () => {
      this.timings.socketOpen = performance.now();
      this.setState("signalling");
    };
    ws.onmessage = (event) => {
      if (typeof event.data !== "string") {
        this.receiveMedia(event.data);
        return;
      }
      let message;
      try {
        message = JSON.parse(event.data);
      } catch {
        return;
      }
      if (message.event === "system/init") initialised = true;
      this.handle(message.event, message.payload || message.data || {}).catch((error) => this.fail(error.message));
    };
    ws.onclose = (event) => {
      if (this.ws !== ws) return; // an old socket closing after a reconnect
      this.ws = null;
      if (!initialised) {
        this.fail(`the signalling WebSocket closed before the session started (code ${event.code}); ` +
          "check that the desktop and the stream are running and the token is right");
        return;
      }
      this.teardownPeer();
      if (this.state !== "failed") this.setState("disconnected", event.reason || "");
    };
  }

  send(event, payload) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ event, payload }));
  }

  async handle(event, payload) {
    switch (event) {
      case "system/init":
        this.sessionId = payload.session_id || null;
        this.screen = payload.screen_size || null;
        this.sessions = new Map(Object.entries(payload.sessions || {}));
        this.host = payload.control_host?.has_host ? payload.control_host.host_id : null;
        if (payload.control_takeover) this.takeover = payload.control_takeover;
        this.showControl();
        // A watcher until the person asks for control (the SDK asks at once; we do not).
        if (this.mode === "websocket") await this.requestMedia();
        else this.send("signal/request", { video: {}, audio: {} });
        break;
      case "media/provide":
        this.startMedia(payload);
        break;
      case "signal/provide":
      case "signal/offer":
      case "signal/restart":
        await this.answer(payload);
        break;
      case "signal/candidate":
        await this.addCandidate(payload);
        break;
      case "signal/close":
        this.teardownPeer();
        this.setState("disconnected", "the server closed the video connection");
        break;
      case "control/host":
        this.host = payload.has_host ? payload.host_id : null;
        this.clipboardText = null;
        this.showControl();
        if (this.host === this.sessionId) this.pushClipboard();
        break;
      case "control/takeover":
        this.takeover = payload;
        this.showControl();
        break;
      case "control/request":
        this.callbacks.onError(`${payload.id} asks for control: give it with "Give control to…"`);
        break;
      case "session/created":
        this.sessions.set(payload.id, payload);
        this.showControl();
        break;
      case "session/deleted":
        this.sessions.delete(payload.id);
        this.showControl();
        break;
      case "clipboard/updated":
        await this.pullClipboard(payload.text ?? "");
        break;
      case "system/error":
        this.callbacks.onError(`live view: ${payload.message || "refused"}`);
        break;
      case "system/disconnect":
        this.callbacks.onError(`live view disconnected by the server: ${payload.message || "no reason given"}`);
        this.disconnect("disconnected");
        break;
      default:
        break; // heartbeats, session lists and the rest of neko's events are not needed here
    }
  }

  async answer(payload) {
    this.teardownPeer();
    // The server lists only the ICE servers it wants; none means host candidates only (LAN, loopback).
    const servers = (payload.iceservers || payload.ice || []).filter((s) => s && s.urls);
    const pc = new RTCPeerConnection({ iceServers: servers });
    this.pc = pc;
    this.timings.offer = performance.now();
    this.setState("negotiating");
    pc.ontrack = (event) => {
      const stream = event.streams[0] || new MediaStream([event.track]);
      if (this.video.srcObject !== stream) this.video.srcObject = stream;
      this.watchFrames();
    };
    pc.onicecandidate = (event) => {
      if (event.candidate && event.candidate.candidate) this.send("signal/candidate", event.candidate.toJSON());
    };
    pc.ondatachannel = (event) => this.useChannel(event.channel);
    pc.onconnectionstatechange = () => {
      if (this.pc !== pc) return;
      const state = pc.connectionState;
      if (state === "connected") {
        this.timings.connected ??= performance.now();
        this.setState("connected");
      } else if (state === "failed" && this.transport === "auto" && this.canvas) {
        this.fallBack("the WebRTC connection failed");
      } else if (state === "failed") {
        this.fail("the WebRTC connection failed (no network path between this browser and the server's candidates)");
      } else if (state === "disconnected") {
        this.setState("negotiating", "connection interrupted; waiting for it to recover");
      }
    };
    await pc.setRemoteDescription({ type: "offer", sdp: payload.sdp });
    for (const candidate of this.pendingCandidates.splice(0)) await pc.addIceCandidate(candidate);
    const answer = await pc.createAnswer();
    await pc.setLocalDescription(answer);
    this.send("signal/answer", { sdp: pc.localDescription.sdp });
    this.startTimers();
    if (this.transport === "auto" && this.canvas) {
      const timeout = servers.length ? ICE_TIMEOUT_WITH_RELAYS_MS : ICE_TIMEOUT_MS;
      clearTimeout(this.iceTimer);
      this.iceTimer = setTimeout(() => {
        if (this.pc === pc && pc.connectionState !== "connected") {
          this.fallBack(`WebRTC did not connect within ${timeout / 1000} s`);
        }
      }, timeout);
    }
  }

  /** WebRTC did not get through: the same session again over the WebSocket transport. */
  fallBack(reason) {
    const ws = this.ws;
    this.ws = null; // its close is ours: not a disconnection to report
    this.teardownPeer();
    if (ws && ws.readyState <= WebSocket.OPEN) ws.close(1000, "falling back to the WebSocket transport");
    this.setState("signalling", reason);
    this.openSocket("websocket", reason);
  }

  /** The WebSocket transport's media: H.264 where WebCodecs decodes it, JPEG pictures otherwise. */
  async requestMedia() {
    let format = this.videoFormat;
    if (!format) {
      format = (await decodesH264()) ? "h264" : "jpeg";
      if (format === "jpeg") this.reason += "; JPEG pictures: this browser has no H.264 decoder (WebCodecs)";
      this.callbacks.onTransport?.(this.mode, this.reason);
    }
    this.send("media/request", { video: format, audio: await decodesOpus() });
  }

  startMedia(payload) {
    this.media?.close();
    this.sound?.close();
    this.sound = null;
    this.showSurface("websocket");
    if (payload.audio && !payload.audio.disabled) {
      // The <video>, hidden, plays the sound: its mute toggle (audio.js) works as for WebRTC.
      this.sound = new SocketSound((message) => this.callbacks.onError(`live view: ${message}`));
      this.video.srcObject = this.sound.stream;
      this.video.addEventListener("volumechange", this.resumeSound);
      this.video.addEventListener("play", this.resumeSound);
      this.sound.resume();
    }
    this.media = new SocketMedia(this.canvas, payload.video?.format || "h264", {
      onPicture: () => {
        if (this.timings.firstFrame !== undefined) return;
        this.timings.firstFrame = performance.now();
        this.timings.connected ??= this.timings.firstFrame;
        this.setState("connected");
      },
      askKeyframe: () => this.send("media/keyframe", {}),
      onError: (message) => this.callbacks.onError(`live view: ${message}`),
    });
    this.input?.detach();
    this.input = new InputCapture(this.canvas, (bytes) => this.sendInput(bytes), () => this.screen);
    this.setState("negotiating", "waiting for the first picture");
    this.startTimers();
  }

  receiveMedia(buffer) {
    const message = parseMessage(buffer);
    if (!message) return;
    if (message.kind === KIND.DATA) {
      const rtt = pongRoundTrip(buffer.slice(buffer.byteLength - message.body.byteLength));
      if (rtt !== null) this.stats.rttMs = rtt;
    } else if (message.kind === KIND.OPUS) {
      this.sound?.receive(message);
    } else if (this.media) {
      this.media.receive(message);
    }
  }

  /** Show the <video> (WebRTC) or the <canvas> (the WebSocket transport). */
  showSurface(mode) {
    if (!this.canvas) return;
    this.canvas.hidden = mode !== "websocket";
    this.video.hidden = mode === "websocket";
  }

  /** The picture's size, whichever element shows it. */
  pictureSize() {
    if (this.mode === "websocket" && this.canvas) return { videoWidth: this.canvas.width, videoHeight: this.canvas.height };
    return { videoWidth: this.video.videoWidth, videoHeight: this.video.videoHeight };
  }

  async addCandidate(candidate) {
    if (!candidate || !candidate.candidate) return;
    if (!this.pc || !this.pc.remoteDescription) {
      this.pendingCandidates.push(candidate);
      return;
    }
    await this.pc.addIceCandidate(candidate);
  }

  useChannel(channel) {
    channel.binaryType = "arraybuffer";
    this.channel = channel;
    channel.onmessage = (event) => {
      if (!(event.data instanceof ArrayBuffer)) return;
      const rtt = pongRoundTrip(event.data);
      if (rtt !== null) this.stats.rttMs = rtt;
    };
    this.input?.detach();
    this.input = new InputCapture(this.video, (bytes) => this.sendInput(bytes), () => this.screen);
  }

  sendInput(bytes) {
    if (this.mode === "websocket") {
      if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(bytes);
    } else if (this.channel && this.channel.readyState === "open") {
      this.channel.send(bytes);
    }
  }

  /** Time of the first presented frame, and a frame count that does not depend on getStats. */
  watchFrames() {
    if (this.frameWatch || !this.video.requestVideoFrameCallback) return;
    const watch = {}; // identity of this peer's callback chain: a new peer starts a new one
    this.frameWatch = watch;
    this.framesPresented = 0;
    const onFrame = () => {
      if (this.frameWatch !== watch) return;
      this.framesPresented += 1;
      this.timings.firstFrame ??= performance.now();
      this.video.requestVideoFrameCallback(onFrame);
    };
    this.video.requestVideoFrameCallback(onFrame);
  }

  startTimers() {
    this.stopTimers();
    this.timers.push(setInterval(() => this.sendInput(encode.ping(Date.now())), PING_INTERVAL_MS));
    this.timers.push(setInterval(() => this.sampleStats(), STATS_INTERVAL_MS));
  }

  stopTimers() {
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
  }

  async sampleStats() {
    if (this.media) {
      this.sampleSocketStats();
      return;
    }
    if (!this.pc) return;
    const report = await this.pc.getStats();
    let inbound = null;
    const codecs = new Map();
    report.forEach((s) => {
      if (s.type === "inbound-rtp" && s.kind === "video") inbound = s;
      if (s.type === "codec") codecs.set(s.id, s.mimeType);
    });
    if (!inbound) return;
    const sample = { t: inbound.timestamp, frames: inbound.framesDecoded || 0, bytes: inbound.bytesReceived || 0 };
    const previous = this.previousSample;
    this.previousSample = sample;
    this.stats.framesDecoded = sample.frames;
    this.stats.codec = codecs.get(inbound.codecId) || "";
    if (previous && sample.t > previous.t) {
      const seconds = (sample.t - previous.t) / 1000;
      this.stats.fps = (sample.frames - previous.frames) / seconds;
      this.stats.kbps = (8 * (sample.bytes - previous.bytes)) / 1000 / seconds;
    }
    this.callbacks.onStats(this.stats, this.pictureSize());
  }

  sampleSocketStats() {
    const sample = { t: performance.now(), frames: this.media.pictures, bytes: this.media.bytes };
    const previous = this.previousSample;
    this.previousSample = sample;
    this.stats.framesDecoded = sample.frames;
    this.stats.codec = this.media.format === "jpeg" ? "JPEG" : this.media.codec;
    if (previous && sample.t > previous.t) {
      const seconds = (sample.t - previous.t) / 1000;
      this.stats.fps = (sample.frames - previous.frames) / seconds;
      this.stats.kbps = (8 * (sample.bytes - previous.bytes)) / 1000 / seconds;
    }
    this.callbacks.onStats(this.stats, this.pictureSize());
  }

  /** Everything the page shows about control: who is here, in which role, and what this viewer may do. */
  showControl() {
    const mine = this.sessions.get(this.sessionId);
    const sessions = [...this.sessions.values()].map((s) => ({
      id: s.id, access: s.access || "admin", role: s.id === this.host ? "controller" : "watcher",
    }));
    this.callbacks.onControl({
      me: this.sessionId, host: this.host, takeover: this.takeover, sessions,
      admin: mine ? mine.profile?.is_admin !== false : false,
      canHost: mine ? mine.profile?.can_host !== false : false,
    });
  }

  /** Ask for control; `takeover` holds agent input off at once (a person is about to act). */
  requestControl() {
    this.send("control/request", { takeover: true });
  }

  releaseControl() {
    this.send("control/release", {});
  }

  giveControl(id) {
    this.send("control/give", { id });
  }

  takeControl() {
    this.send("control/take", {});
  }

  /** Keep the browser's clipboard and the desktop's in step while this viewer is the controller. */
  setClipboardSync(on) {
    this.clipboardSync = on;
    window.removeEventListener("focus", this.onWindowFocus);
    this.video.removeEventListener("focus", this.onWindowFocus);
    if (!on) return;
    window.addEventListener("focus", this.onWindowFocus);
    this.video.addEventListener("focus", this.onWindowFocus);
    this.pushClipboard();
  }

  /** The desktop's clipboard changed (or we just got control): write it to the browser's clipboard. */
  async pullClipboard(text) {
    if (!this.clipboardSync) return;
    this.clipboardText = text;
    try {
      await navigator.clipboard.writeText(text);
      this.callbacks.onClipboard(text, null);
    } catch (error) {
      this.callbacks.onClipboard(text, `the browser did not allow writing its clipboard (${error.message})`);
    }
  }

  /** The browser's clipboard to the desktop, when it changed since the two last agreed (read on focus). */
  async pushClipboard() {
    if (!this.clipboardSync || this.host !== this.sessionId || !navigator.clipboard?.readText) return;
    let text;
    try {
      text = await navigator.clipboard.readText();
    } catch (error) {
      this.callbacks.onClipboard(null, `the browser did not allow reading its clipboard (${error.message})`);
      return;
    }
    if (text === this.clipboardText || !text) return;
    this.clipboardText = text;
    this.send("clipboard/set", { text });
    this.callbacks.onClipboard(text, null);
  }

  teardownPeer() {
    clearTimeout(this.iceTimer);
    this.iceTimer = null;
    this.media?.close();
    this.media = null;
    if (this.sound) {
      this.sound.close();
      this.sound = null;
      this.video.removeEventListener("volumechange", this.resumeSound);
      this.video.removeEventListener("play", this.resumeSound);
      this.video.srcObject = null;
    }
    this.stopTimers();
    this.frameWatch = null;
    this.input?.detach();
    this.input = null;
    this.channel = null;
    if (this.pc) {
      const pc = this.pc;
      this.pc = null;
      pc.close();
    }
    this.pendingCandidates = [];
    this.previousSample = null;
  }

  disconnect(state = "idle") {
    const ws = this.ws;
    this.ws = null;
    this.sessions = new Map();
    this.host = null;
    this.clipboardText = null;
    this.teardownPeer();
    if (ws && ws.readyState <= WebSocket.OPEN) ws.close(1000, "viewer disconnected");
    this.video.srcObject = null;
    this.showSurface("webrtc");
    this.mode = null;
    this.setState(state);
  }

  fail(message) {
    this.callbacks.onError(`live view: ${message}`);
    this.disconnect("failed");
  }

  setState(state, detail = "") {
    this.state = state;
    this.callbacks.onState(state, detail);
  }
}
