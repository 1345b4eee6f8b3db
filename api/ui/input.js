// Mouse and keyboard on the live view → neko's binary data-channel frames (docs/streaming.md).
// Each frame: u8 opcode, u16 payload length, payload; all big-endian.

export const OP = { MOVE: 0x01, SCROLL: 0x02, KEY_DOWN: 0x03, KEY_UP: 0x04, BUTTON_DOWN: 0x05, BUTTON_UP: 0x06, PING: 0x07 };
export const OP_PONG = 0x03; // server → client

const NAMED_KEYSYMS = {
  Backspace: 0xff08, Tab: 0xff09, Enter: 0xff0d, Return: 0xff0d, Escape: 0xff1b, Delete: 0xffff,
  Home: 0xff50, Left: 0xff51, Up: 0xff52, Right: 0xff53, Down: 0xff54,
  ArrowLeft: 0xff51, ArrowUp: 0xff52, ArrowRight: 0xff53, ArrowDown: 0xff54,
  PageUp: 0xff55, PageDown: 0xff56, End: 0xff57, Insert: 0xff63,
  Shift: 0xffe1, ShiftLeft: 0xffe1, ShiftRight: 0xffe2, Control: 0xffe3, ControlLeft: 0xffe3, ControlRight: 0xffe4,
  CapsLock: 0xffe5, Alt: 0xffe9, AltLeft: 0xffe9, AltRight: 0xffea, Meta: 0xffeb, MetaLeft: 0xffeb, MetaRight: 0xffec,
  NumLock: 0xff7f, ScrollLock: 0xff14, Space: 0x20,
};
for (let n = 1; n <= 12; n++) NAMED_KEYSYMS[`F${n}`] = 0xffbe + n - 1;

/** `KeyboardEvent.key` (and `code`, for the side of a modifier) → X11 keysym, or null if unknown. */
export function keysymOf(key, code = "") {
  if (key === "Shift" || key === "Control" || key === "Alt" || key === "Meta") {
    if (code.endsWith("Right")) return NAMED_KEYSYMS[`${key}Right`];
  }
  if (key in NAMED_KEYSYMS) return NAMED_KEYSYMS[key];
  const chars = [...key];
  if (chars.length !== 1) return null;
  const point = chars[0].codePointAt(0);
  if (point >= 0x20 && point <= 0x7e) return point;
  return 0x01000000 + point;
}

function frame(opcode, length, fill) {
  const buffer = new ArrayBuffer(3 + length);
  const view = new DataView(buffer);
  view.setUint8(0, opcode);
  view.setUint16(1, length);
  fill(view);
  return buffer;
}

const u16 = (v) => Math.max(0, Math.min(0xffff, Math.round(v)));
const i16 = (v) => Math.max(-0x8000, Math.min(0x7fff, Math.round(v)));

export const encode = {
  move: (x, y) => frame(OP.MOVE, 4, (v) => { v.setUint16(3, u16(x)); v.setUint16(5, u16(y)); }),
  scroll: (dx, dy) => frame(OP.SCROLL, 5, (v) => { v.setInt16(3, i16(dx)); v.setInt16(5, i16(dy)); v.setUint8(7, 0); }),
  key: (keysym, down) => frame(down ? OP.KEY_DOWN : OP.KEY_UP, 4, (v) => v.setUint32(3, keysym >>> 0)),
  button: (button, down) => frame(down ? OP.BUTTON_DOWN : OP.BUTTON_UP, 4, (v) => v.setUint32(3, button)),
  ping: (ms) => frame(OP.PING, 8, (v) => {
    v.setUint32(3, Math.floor(ms / 0xffffffff));
    v.setUint32(7, ms % 0xffffffff);
  }),
};

/** Round trip in ms from a pong frame (it echoes our timestamp first), or null if it is not one. */
export function pongRoundTrip(buffer, now = Date.now()) {
  const view = new DataView(buffer);
  if (view.byteLength < 11 || view.getUint8(0) !== OP_PONG) return null;
  const sent = view.getUint32(3) * 0xffffffff + view.getUint32(7);
  return now - sent;
}

/**
 * Where a pointer event lands on the remote screen: the picture is letterboxed inside the
 * <video> box (object-fit: contain), then scaled from video pixels to screen pixels.
 * Returns null outside the picture.
 */
export function screenPoint(video, clientX, clientY, screen) {
  const width = video.videoWidth ?? video.width; // a <video>, or the <canvas> of the WebSocket transport
  const height = video.videoHeight ?? video.height;
  if (!width || !height) return null;
  const box = video.getBoundingClientRect();
  const scale = Math.min(box.width / width, box.height / height);
  const left = box.left + (box.width - width * scale) / 2;
  const top = box.top + (box.height - height * scale) / 2;
  const vx = (clientX - left) / scale;
  const vy = (clientY - top) / scale;
  if (vx < 0 || vy < 0 || vx >= width || vy >= height) return null;
  const sw = (screen && screen.width) || width;
  const sh = (screen && screen.height) || height;
  return { x: Math.min(sw - 1, Math.floor((vx * sw) / width)), y: Math.min(sh - 1, Math.floor((vy * sh) / height)) };
}

const RELEASE_COMBO = (e) => e.ctrlKey && (e.key === "]" || e.code === "BracketRight");
const LINE_PX = 40; // wheel deltas in lines or pages are turned into pixels, as the server expects
const BUTTONS = { 0: 1, 1: 2, 2: 3 }; // DOM button → X button

/** Listens on the <video> and sends what the user does; `send(ArrayBuffer)` drops it if not open. */
export class InputCapture {
  constructor(video, send, screen) {
    this.video = video;
    this.send = send;
    this.screen = screen; // () => {width, height} of the remote screen
    this.keys = new Map(); // event.code → keysym pressed, so the key-up matches whatever the key-down sent
    this.buttons = new Set();
    this.pendingMove = null;
    this.frameRequested = false;
    this.last = null;
    this.handlers = {
      pointermove: (e) => this.onMove(e),
      pointerdown: (e) => this.onButton(e, true),
      pointerup: (e) => this.onButton(e, false),
      wheel: (e) => this.onWheel(e),
      keydown: (e) => this.onKey(e, true),
      keyup: (e) => this.onKey(e, false),
      contextmenu: (e) => e.preventDefault(),
      blur: () => this.releaseAll(),
    };
    for (const [name, handler] of Object.entries(this.handlers)) {
      video.addEventListener(name, handler, { passive: false });
    }
  }

  detach() {
    this.releaseAll();
    for (const [name, handler] of Object.entries(this.handlers)) this.video.removeEventListener(name, handler);
  }

  point(e) {
    return screenPoint(this.video, e.clientX, e.clientY, this.screen());
  }

  onMove(e) {
    const p = this.point(e);
    if (!p) return;
    // One move per animation frame: the newest position is all that matters.
    this.pendingMove = p;
    if (this.frameRequested) return;
    this.frameRequested = true;
    requestAnimationFrame(() => {
      this.frameRequested = false;
      this.flushMove();
    });
  }

  flushMove() {
    const p = this.pendingMove;
    this.pendingMove = null;
    if (p && (!this.last || p.x !== this.last.x || p.y !== this.last.y)) {
      this.send(encode.move(p.x, p.y));
      this.last = p;
    }
  }

  onButton(e, down) {
    const button = BUTTONS[e.button];
    if (!button) return;
    e.preventDefault();
    if (down) this.video.focus({ preventScroll: true });
    const p = this.point(e);
    if (down && !p) return; // a press on the letterbox bars is not on the screen
    if (!down && !this.buttons.has(button)) return;
    if (down) this.video.setPointerCapture?.(e.pointerId);
    this.pendingMove = p || this.pendingMove;
    this.flushMove(); // the button acts where the pointer is
    this.send(encode.button(button, down));
    if (down) this.buttons.add(button);
    else this.buttons.delete(button);
  }

  onWheel(e) {
    const p = this.point(e);
    if (!p) return;
    e.preventDefault();
    const factor = e.deltaMode === 1 ? LINE_PX : e.deltaMode === 2 ? LINE_PX * 20 : 1;
    this.pendingMove = p;
    this.flushMove();
    this.send(encode.scroll(e.deltaX * factor, e.deltaY * factor));
  }

  onKey(e, down) {
    if (down && RELEASE_COMBO(e)) {
      e.preventDefault();
      this.video.blur();
      return;
    }
    if (e.isComposing) return;
    let keysym;
    if (down) {
      keysym = keysymOf(e.key, e.code);
      if (keysym === null) return; // not in the map: dropped, as the reference viewer does
      this.keys.set(e.code || e.key, keysym);
    } else {
      keysym = this.keys.get(e.code || e.key);
      if (keysym === undefined) return;
      this.keys.delete(e.code || e.key);
    }
    e.preventDefault(); // keys belong to the desktop while the view has focus (Tab, Backspace, …)
    this.send(encode.key(keysym, down));
  }

  /** Leaving the view must not leave keys or buttons held down on the desktop. */
  releaseAll() {
    for (const keysym of this.keys.values()) this.send(encode.key(keysym, false));
    this.keys.clear();
    for (const button of this.buttons) this.send(encode.button(button, false));
    this.buttons.clear();
  }
}
