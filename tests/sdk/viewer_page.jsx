// A page that uses the reference's own browser clients, unchanged: the SDK (sandbox-agent@0.4.2)
// starts the stream, and the React DesktopViewer (@sandbox-agent/react@0.4.2) shows it.
//
// Bundled by tests/sdk/build_viewer.mjs; tests/test_sdk_viewer.py opens it as
//   index.html#url=<server base URL>&token=<token>
// Everything the test reads is on `window.viewerProbe`; `window.runRecordingChecks()` drives the
// SDK's recording methods. Nothing of the SDK or the viewer is patched: the page only wraps the
// RTCPeerConnection and WebSocket constructors to watch what the SDK creates.

import { DesktopViewer } from "@sandbox-agent/react";
import { createRoot } from "react-dom/client";
import { SandboxAgent, SandboxAgentError } from "sandbox-agent";

const params = new URLSearchParams(location.hash.slice(1));
const BASE_URL = params.get("url");
const TOKEN = params.get("token") || undefined;

const probe = {
  t0: performance.now(),
  phase: "loading", // loading → starting → mounted, or failed
  viewer: null, // {type, width, height} from the viewer's onConnect
  disconnected: false,
  errors: [],
  sockets: [], // signalling URLs the SDK opened
  peers: [], // RTCPeerConnections the SDK created
  timings: {}, // ms since t0: mounted, ready, connected, firstFrame
  presentedFrames: 0,
  streamStart: null,
};
window.viewerProbe = probe;

const since = () => performance.now() - probe.t0;
const describe = (error) => {
  if (error instanceof SandboxAgentError) return `SandboxAgentError ${error.status}: ${JSON.stringify(error.problem ?? null)}`;
  return error instanceof Error ? error.message : String(error?.message ?? error);
};
window.addEventListener("error", (event) => probe.errors.push(`uncaught: ${event.message}`));
window.addEventListener("unhandledrejection", (event) => probe.errors.push(`unhandled: ${describe(event.reason)}`));

// Watch, not change: the SDK takes these constructors from globalThis when it connects.
const NativePeerConnection = window.RTCPeerConnection;
window.RTCPeerConnection = class WatchedPeerConnection extends NativePeerConnection {
  constructor(...args) {
    super(...args);
    probe.peers.push(this);
    this.addEventListener("connectionstatechange", () => {
      if (this.connectionState === "connected") probe.timings.connected ??= since();
    });
  }
};
const NativeWebSocket = window.WebSocket;
window.WebSocket = class WatchedWebSocket extends NativeWebSocket {
  constructor(url, protocols) {
    super(url, protocols);
    probe.sockets.push(String(url));
  }
};

/** The newest peer connection's state, and its video codec from getStats (e.g. "video/VP8"). */
probe.peerInfo = async () => {
  const pc = probe.peers.at(-1);
  if (!pc) return null;
  const info = { connectionState: pc.connectionState, iceConnectionState: pc.iceConnectionState, codec: null,
    framesDecoded: null, peers: probe.peers.length };
  const codecs = new Map();
  let inbound = null;
  (await pc.getStats()).forEach((s) => {
    if (s.type === "codec") codecs.set(s.id, s.mimeType);
    if (s.type === "inbound-rtp" && s.kind === "video") inbound = s;
  });
  if (inbound) {
    info.codec = codecs.get(inbound.codecId) ?? null;
    info.framesDecoded = inbound.framesDecoded;
  }
  return info;
};

/** Frames decoded and presented by the viewer's <video> over `ms` (counts from the element, not getStats). */
probe.measureFps = async (ms) => {
  const video = document.querySelector("video");
  const decoded = () => video.getVideoPlaybackQuality().totalVideoFrames;
  const [d0, p0, t0] = [decoded(), probe.presentedFrames, performance.now()];
  await new Promise((resolve) => setTimeout(resolve, ms));
  const seconds = (performance.now() - t0) / 1000;
  return { decodedFps: (decoded() - d0) / seconds, presentedFps: (probe.presentedFrames - p0) / seconds,
    dropped: video.getVideoPlaybackQuality().droppedVideoFrames, seconds };
};

/** Where screen pixel (x, y) is drawn in the letterboxed <video>, in viewport coordinates. */
probe.screenPointToViewport = (x, y) => {
  const video = document.querySelector("video");
  const r = video.getBoundingClientRect();
  const scale = Math.min(r.width / video.videoWidth, r.height / video.videoHeight);
  const left = r.left + (r.width - video.videoWidth * scale) / 2;
  const top = r.top + (r.height - video.videoHeight * scale) / 2;
  return { x: left + (x + 0.5) * scale, y: top + (y + 0.5) * scale, scale };
};

function watchVideo() {
  const video = document.querySelector("video");
  if (!video) {
    setTimeout(watchVideo, 10);
    return;
  }
  const onFrame = (_now, metadata) => {
    probe.timings.firstFrame ??= since();
    probe.presentedFrames = metadata.presentedFrames;
    video.requestVideoFrameCallback(onFrame);
  };
  video.requestVideoFrameCallback(onFrame);
}

// Module-level callbacks: DesktopViewer reconnects whenever their identity changes.
const onConnect = (status) => {
  probe.viewer = status;
  probe.timings.ready ??= since();
};
const onDisconnect = () => {
  probe.disconnected = true;
};
const onError = (error) => probe.errors.push(`viewer: ${describe(error)}`);

async function main() {
  if (!BASE_URL) throw new Error("open the page as index.html#url=<server>&token=<token>");
  const client = new SandboxAgent({ baseUrl: BASE_URL, token: TOKEN });
  probe.client = client;
  probe.phase = "starting";
  probe.streamStart = await client.startDesktopStream(); // DesktopViewer does not start it
  createRoot(document.getElementById("root")).render(
    <DesktopViewer client={client} height={760} onConnect={onConnect} onDisconnect={onDisconnect}
      onError={onError} />,
  );
  probe.timings.mounted = since();
  probe.phase = "mounted";
  watchVideo();
}

main().catch((error) => {
  probe.phase = "failed";
  probe.errors.push(`main: ${describe(error)}`);
});

// -- recording: the SDK's recording methods, from the browser (CORS preflights included) ---------

/** Runs each recording method once; returns [{method, ok, detail}] (never throws). */
window.runRecordingChecks = async () => {
  const client = probe.client;
  const results = [];
  const state = {};
  const check = async (method, fn) => {
    try {
      results.push({ method, ok: true, detail: (await fn()) ?? "" });
    } catch (error) {
      results.push({ method, ok: false, detail: describe(error) });
    }
  };
  const expect = (condition, message) => {
    if (!condition) throw new Error(message);
  };
  const info = (what, value) => {
    expect(value && /^rec_\d+$/.test(value.id), `${what}: id ${JSON.stringify(value?.id)}`);
    expect(["recording", "completed", "failed"].includes(value.status), `${what}: status ${value.status}`);
    expect(value.fileName === `${value.id}.mp4`, `${what}: fileName ${value.fileName}`);
    expect(Number.isInteger(value.bytes) && typeof value.startedAt === "string", `${what}: ${JSON.stringify(value)}`);
    return value;
  };

  await check("startDesktopRecording", async () => {
    const started = info("start", await client.startDesktopRecording({ fps: 15 }));
    expect(started.status === "recording" && started.bytes === 0, `start: ${JSON.stringify(started)}`);
    state.id = started.id;
    await new Promise((resolve) => setTimeout(resolve, 1200)); // about a second of video
    return started.id;
  });
  await check("stopDesktopRecording", async () => {
    const stopped = info("stop", await client.stopDesktopRecording());
    expect(stopped.id === state.id && stopped.status === "completed", `stop: ${JSON.stringify(stopped)}`);
    expect(stopped.bytes > 0 && typeof stopped.endedAt === "string", `stop: ${JSON.stringify(stopped)}`);
    state.bytes = stopped.bytes;
    return `${stopped.bytes} bytes`;
  });
  await check("listDesktopRecordings", async () => {
    const { recordings } = await client.listDesktopRecordings();
    expect(Array.isArray(recordings), "recordings is not an array");
    expect(recordings.some((r) => info("list item", r).id === state.id), `${state.id} not listed`);
    return `${recordings.length} listed`;
  });
  await check("getDesktopRecording", async () => {
    const got = info("get", await client.getDesktopRecording(state.id));
    expect(got.status === "completed" && got.bytes === state.bytes, `get: ${JSON.stringify(got)}`);
  });
  await check("downloadDesktopRecording", async () => {
    const bytes = await client.downloadDesktopRecording(state.id);
    expect(bytes instanceof Uint8Array, `not a Uint8Array: ${Object.prototype.toString.call(bytes)}`);
    const box = new TextDecoder().decode(bytes.slice(4, 8));
    expect(box === "ftyp", `first box ${JSON.stringify(box)}, not ftyp`);
    expect(bytes.length === state.bytes, `${bytes.length} bytes downloaded, ${state.bytes} reported`);
    return `${bytes.length} bytes, ftyp`;
  });
  await check("deleteDesktopRecording", async () => {
    const answer = await client.deleteDesktopRecording(state.id);
    expect(answer === undefined, `answered ${JSON.stringify(answer)}`);
    try {
      await client.getDesktopRecording(state.id);
    } catch (error) {
      expect(error instanceof SandboxAgentError && error.status === 404, `get after delete: ${describe(error)}`);
      return "deleted (then 404)";
    }
    throw new Error("still there after delete");
  });
  return results;
};
