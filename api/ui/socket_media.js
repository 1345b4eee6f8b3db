// The live view's media on the WebSocket transport (docs/streaming.md, "The WebSocket transport"): binary
// messages of a 10-byte header (u8 kind, u8 flags, u64 timestamp in µs, big-endian) and a payload, drawn on
// a <canvas>. H.264 access units (Annex-B) go to WebCodecs' VideoDecoder, configured from the first
// keyframe's SPS; a browser without an H.264 decoder asks the server for JPEG pictures instead.

export const KIND = { H264: 1, OPUS: 2, JPEG: 3, DATA: 4 };
const HEADER_BYTES = 10;
const KEYFRAME = 0x01;
const MAX_DECODE_QUEUE = 8; // pictures waiting in the decoder before deltas are dropped for the next keyframe
const PROBE_CODEC = "avc1.42E01F"; // constrained baseline 3.1: what the server's encoder sends, in its smallest level

/** Whether this browser decodes H.264 with WebCodecs (absent outside secure contexts: http:// to a non-local host). */
export async function decodesH264() {
  if (typeof VideoDecoder === "undefined") return false;
  try {
    return (await VideoDecoder.isConfigSupported({ codec: PROBE_CODEC, optimizeForLatency: true })).supported === true;
  } catch {
    return false;
  }
}

/** `{kind, keyframe, timestamp, body}` of one binary message, or null if it is too short. */
export function parseMessage(buffer) {
  if (buffer.byteLength < HEADER_BYTES) return null;
  const view = new DataView(buffer);
  return {
    kind: view.getUint8(0),
    keyframe: (view.getUint8(1) & KEYFRAME) !== 0,
    timestamp: Number(view.getBigUint64(2)),
    body: new Uint8Array(buffer, HEADER_BYTES),
  };
}

/** The first SPS NAL unit (its bytes after the start code) of an Annex-B access unit, or null if it has none. */
export function findSps(bytes) {
  for (let i = 0; i + 6 < bytes.length; i++) {
    if (bytes[i] !== 0 || bytes[i + 1] !== 0 || bytes[i + 2] !== 1 || (bytes[i + 3] & 0x1f) !== 7) continue;
    let end = i + 4;
    while (end + 2 < bytes.length && !(bytes[end] === 0 && bytes[end + 1] === 0 && bytes[end + 2] <= 1)) end++;
    return bytes.subarray(i + 3, end);
  }
  return null;
}

/** The `avc1.PPCCLL` codec string of an SPS NAL unit: profile, constraint flags and level, in hex. */
export function avcCodecString(sps) {
  const hex = (b) => b.toString(16).padStart(2, "0");
  return `avc1.${hex(sps[1])}${hex(sps[2])}${hex(sps[3])}`;
}

/**
 * Draws one socket's pictures on `canvas`. `format` is "h264" or "jpeg"; `onPicture()` is called after each
 * picture is drawn; `askKeyframe()` when the decoder needs one (it failed, or fell behind).
 */
export class SocketMedia {
  constructor(canvas, format, { onPicture, askKeyframe, onError }) {
    this.canvas = canvas;
    this.context = canvas.getContext("2d");
    this.format = format;
    this.onPicture = onPicture;
    this.askKeyframe = askKeyframe;
    this.onError = onError;
    this.decoder = null;
    this.codec = "";
    this.sps = ""; // the SPS the decoder was configured with: a new one (a new screen size) reconfigures it
    this.waitingForKeyframe = true;
    this.pictures = 0;
    this.bytes = 0;
    this.dropped = 0;
    this.jpegSeq = 0;
    this.jpegShown = 0;
    this.closed = false;
  }

  /** One video message (H.264 or JPEG). */
  receive(message) {
    if (this.closed) return;
    this.bytes += message.body.byteLength + HEADER_BYTES;
    if (message.kind === KIND.JPEG) this.showJpeg(message.body);
    else if (message.kind === KIND.H264) this.decode(message);
  }

  decode({ keyframe, timestamp, body }) {
    if (keyframe) {
      const sps = findSps(body);
      const key = sps ? sps.join(",") : "";
      if (sps && (!this.decoder || key !== this.sps || this.decoder.state !== "configured")) {
        this.sps = key;
        this.configure(avcCodecString(sps));
      }
      this.waitingForKeyframe = false;
    }
    if (this.waitingForKeyframe || !this.decoder || this.decoder.state !== "configured") return;
    if (!keyframe && this.decoder.decodeQueueSize > MAX_DECODE_QUEUE) {
      // The decoder cannot keep up: skip to the next keyframe rather than fall further behind.
      this.dropped += 1;
      this.waitingForKeyframe = true;
      this.askKeyframe();
      return;
    }
    this.decoder.decode(new EncodedVideoChunk({ type: keyframe ? "key" : "delta", timestamp, data: body }));
  }

  configure(codec) {
    if (this.decoder && this.decoder.state !== "closed") this.decoder.close();
    this.codec = codec;
    this.decoder = new VideoDecoder({
      output: (frame) => this.draw(frame),
      error: (error) => {
        this.onError(`H.264 decoder: ${error.message}`);
        this.waitingForKeyframe = true;
        this.decoder = null;
        this.askKeyframe();
      },
    });
    this.decoder.configure({ codec, optimizeForLatency: true });
  }

  draw(frame) {
    try {
      if (this.closed) return;
      this.resize(frame.displayWidth, frame.displayHeight);
      this.context.drawImage(frame, 0, 0);
      this.pictures += 1;
      this.onPicture();
    } finally {
      frame.close();
    }
  }

  async showJpeg(body) {
    const seq = ++this.jpegSeq;
    const bitmap = await createImageBitmap(new Blob([body], { type: "image/jpeg" }));
    if (this.closed || seq < this.jpegShown) {
      bitmap.close();
      return; // a newer picture was drawn meanwhile
    }
    this.jpegShown = seq;
    this.resize(bitmap.width, bitmap.height);
    this.context.drawImage(bitmap, 0, 0);
    bitmap.close();
    this.pictures += 1;
    this.onPicture();
  }

  resize(width, height) {
    if (this.canvas.width !== width) this.canvas.width = width;
    if (this.canvas.height !== height) this.canvas.height = height;
  }

  close() {
    this.closed = true;
    if (this.decoder && this.decoder.state !== "closed") this.decoder.close();
    this.decoder = null;
  }
}

/** Whether this browser decodes Opus with WebCodecs (the WebSocket transport's sound). */
export async function decodesOpus() {
  if (typeof AudioDecoder === "undefined") return false;
  try {
    return (await AudioDecoder.isConfigSupported({ codec: "opus", sampleRate: 48000, numberOfChannels: 2 })).supported === true;
  } catch {
    return false;
  }
}

const SOUND_SLACK_S = 0.06; // how far ahead of now a (re)started sound is scheduled: room for the next packet
const SOUND_BACKLOG_S = 0.5; // scheduled further ahead than this, the sound restarts from now (it fell behind)

/**
 * The WebSocket transport's Opus packets, decoded (WebCodecs' AudioDecoder) and played back to back into
 * `stream` (a MediaStream): the inspector puts it on its <video>, whose sound toggle (audio.js) then works as
 * for WebRTC. Its AudioContext starts once the page has had a gesture (`resume()`).
 */
export class SocketSound {
  constructor(onError) {
    this.context = new AudioContext({ sampleRate: 48000, latencyHint: "interactive" });
    this.destination = this.context.createMediaStreamDestination();
    this.stream = this.destination.stream;
    this.playhead = 0;
    this.decoder = new AudioDecoder({
      output: (data) => this.play(data),
      error: (error) => onError(`Opus decoder: ${error.message}`),
    });
    this.decoder.configure({ codec: "opus", sampleRate: 48000, numberOfChannels: 2 });
  }

  receive({ timestamp, body }) {
    if (this.decoder.state === "configured") {
      this.decoder.decode(new EncodedAudioChunk({ type: "key", timestamp, data: body }));
    }
  }

  play(data) {
    try {
      const buffer = this.context.createBuffer(data.numberOfChannels, data.numberOfFrames, data.sampleRate);
      for (let channel = 0; channel < data.numberOfChannels; channel++) {
        data.copyTo(buffer.getChannelData(channel), { planeIndex: channel, format: "f32-planar" });
      }
      const source = this.context.createBufferSource();
      source.buffer = buffer;
      source.connect(this.destination);
      const now = this.context.currentTime;
      if (this.playhead < now || this.playhead > now + SOUND_BACKLOG_S) this.playhead = now + SOUND_SLACK_S;
      source.start(this.playhead);
      this.playhead += buffer.duration;
    } finally {
      data.close();
    }
  }

  resume() {
    if (this.context.state === "suspended") void this.context.resume();
  }

  close() {
    if (this.decoder.state !== "closed") this.decoder.close();
    void this.context.close();
  }
}
