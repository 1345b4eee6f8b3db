"""Window screenshots through XComposite: a window's own pixels, also where other windows cover it.

How: the `window-capture` thread's python-xlib connection redirects every child of the root (the
window manager's frames) with `CompositeRedirectAutomatic`. The X server then keeps each top-level
window's contents in an off-screen pixmap and composites the screen from them itself, so nothing on
screen changes, and a covered window's pixels stay whole. A capture names the frame's pixmap
(`NameWindowPixmap`) and copies the client area (or the whole frame) out of it with XShmGetImage on
an XCB connection of the same thread (mss's low-level XCB binding, one copy out of shared memory).

The redirection lasts as long as the connection: it is made once, when the thread connects (at
desktop start through `WindowCapture.start`, or at the first capture). A window that was already
covered when redirection began gets its hidden parts back when its application repaints them (the
server sends it Expose events); the first capture therefore waits `FIRST_REDIRECT_GRACE_S` for that.

Both connections belong to the one thread (docs/architecture.md); it sleeps only on X replies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mmap
import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from mss.linux import xcb
from PIL import Image
from Xlib import X
from Xlib import error as xerror
from Xlib.display import Display
from Xlib.ext import composite
from Xlib.protocol import request

from desktop.core.errors import DomainError, ScreenshotFailed, WindowNotFound
from desktop.screen.cursor import Cursor, CursorReader
from desktop.screen.screenshots import Region, Screenshot, ShotOptions, render
from desktop.windows.query import WindowNotViewable, client_window_ids, describe_windows
from desktop.x11.reconnect import ReconnectOnce
from desktop.x11.session import Session
from desktop.x11.thread import open_display

logger = logging.getLogger("sandbox_desktop.window_capture")
T = TypeVar("T")

FIRST_REDIRECT_GRACE_S = 0.15
"""After redirection begins, applications repaint what was covered (bench/window_capture.py checks
that the first capture of a covered window is whole)."""
_ALL_PLANES = 0xFFFFFFFF
_MAX_CACHED_FRAMES = 256
_MAX_TREE_DEPTH = 16  # reparenting window managers nest a client one or two levels below the root
_GONE = (xerror.BadWindow, xerror.BadDrawable, xerror.BadMatch, xerror.BadPixmap)


@dataclass(frozen=True)
class WindowShot:
    """A window capture: the encoded image, and the window it shows."""

    shot: Screenshot
    """The image; `shot.region` is the captured rectangle in screen pixels (it may reach off-screen)."""
    window_id: int
    frame: bool
    """Whether the image includes the window manager's decorations."""


class _Refused(Exception):
    """The window's cached frame did not name a pixmap: look the frame up again."""


class _SharedImage:
    """An MIT-SHM segment attached to an XCB connection, grown when a capture needs more."""

    def __init__(self, conn: xcb.Connection, size: int) -> None:
        self.conn = conn
        self.size = 0
        self.buffer: mmap.mmap | None = None
        self.segment: xcb.ShmSeg | None = None
        self._attach(size)

    def _attach(self, size: int) -> None:
        self.close()
        fd = os.memfd_create("window-capture", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            self.buffer = mmap.mmap(fd, size, prot=mmap.PROT_READ)
            self.segment = xcb.ShmSeg(xcb.generate_id(self.conn).value)
        except BaseException:
            os.close(fd)
            raise
        xcb.shm_attach_fd(self.conn, self.segment, fd, 0)  # XCB closes the fd, on success or failure
        self.size = size

    def grab(self, drawable: int, x: int, y: int, width: int, height: int) -> Image.Image:
        """The rectangle of a 24- or 32-bit drawable as an RGB image."""
        needed = width * height * 4
        if needed > self.size:
            self._attach(needed)
        assert self.buffer is not None and self.segment is not None
        reply = xcb.shm_get_image(self.conn, xcb.Drawable(drawable), x, y, width, height, _ALL_PLANES,
                                  xcb.ImageFormat.ZPixmap, self.segment, 0)
        if reply.depth not in (24, 32):
            raise ScreenshotFailed(f"a window of depth {reply.depth} cannot be captured (24 or 32 only)")
        with memoryview(self.buffer) as view:
            # Pixels are 32-bit BGRX (BGRA for a 32-bit window: the alpha is dropped).
            # A decoding copy (BGRX is no mode Pillow maps in place): the image outlives the buffer's next use.
            return Image.frombuffer("RGB", (width, height), view[:needed], "raw", "BGRX", 0, 1)  # type: ignore[arg-type]

    def close(self) -> None:
        if self.buffer is not None:
            self.buffer.close()
            self.buffer = None


class _Connections:
    """The thread's connections: python-xlib (Composite, window queries) and XCB (XShmGetImage)."""

    def __init__(self, display_name: str) -> None:
        self.display_name = display_name
        self.d: Display = open_display(display_name)
        self._cursor: CursorReader | None = None
        self._frames: dict[int, int] = {}
        """Client window -> its frame (a window is reparented only when the window manager restarts)."""
        self.xcb: xcb.Connection | None = None
        self.shm: _SharedImage | None = None
        try:
            if not self.d.has_extension("Composite"):
                raise ScreenshotFailed(f"display {display_name} has no Composite extension: windows cannot "
                                       "be captured apart from the screen")
            self.d.composite_query_version()  # the server answers Composite requests only after this
            root = self.d.screen().root
            root.composite_redirect_subwindows(composite.RedirectAutomatic)
            self.d.sync()
            self.xcb, _screen = xcb.connect(display_name)
            screen = self.d.screen()
            self.shm = _SharedImage(self.xcb, screen.width_in_pixels * screen.height_in_pixels * 4)
        except BaseException:
            self.close()
            raise

    def refuse(self, wid: int) -> DomainError:
        """Why `wid` cannot be captured: 404 when it is not a managed window, 409 when it is not shown."""
        if wid in client_window_ids(self.d):
            found = describe_windows(self.d, [wid], hidden=True)
            if found:
                return WindowNotViewable.of(found[0])
        return WindowNotFound(f"Window {wid} not found")

    def top_level(self, wid: int) -> int:
        """The window's ancestor that is a child of the root: the window manager's frame."""
        root = self.d.screen().root.id
        current = wid
        for _ in range(_MAX_TREE_DEPTH):
            parent = request.QueryTree(display=self.d.display, window=current).parent
            parent_id = int(parent.id) if parent else X.NONE
            if parent_id in (root, X.NONE):
                return current
            current = parent_id
        raise ScreenshotFailed(f"window {wid} is nested deeper than {_MAX_TREE_DEPTH} levels")

    def grab(self, wid: int, frame: bool) -> tuple[Image.Image, Region]:
        """The window's pixels and the screen rectangle they show, in one round trip (frames are cached)."""
        cached = self._frames.get(wid)
        if cached is not None:
            try:
                return self._grab(wid, cached, frame)
            except (_Refused, *_GONE):
                self._frames.pop(wid, None)  # reparented (the window manager restarted): look again
        try:
            return self._grab(wid, self.top_level(wid), frame)
        except (_Refused, *_GONE):
            raise self.refuse(wid) from None

    def _grab(self, wid: int, top: int, frame: bool) -> tuple[Image.Image, Region]:
        d = self.d.display
        caught = xerror.CatchError(*_GONE)
        pixmap = d.allocate_resource_id()
        # Everything in flight at once; replies come in order, so once they are in the pixmap has been
        # named (or refused) and may be read from the other connection.
        managed = request.GetProperty(display=d, defer=True, delete=False, window=self.d.screen().root.id,
                                      property=self.d.get_atom("_NET_CLIENT_LIST"), type=X.AnyPropertyType,
                                      long_offset=0, long_length=4096)
        attributes = request.GetWindowAttributes(display=d, defer=True, window=wid)
        composite.NameWindowPixmap(display=d, onerror=caught, window=top, pixmap=pixmap,
                                   opcode=d.get_extension_major(composite.extname))
        origin = request.TranslateCoords(display=d, defer=True, src_wid=wid, dst_wid=top, src_x=0, src_y=0)
        outer = request.GetGeometry(display=d, defer=True, drawable=top)
        client = request.GetGeometry(display=d, defer=True, drawable=wid)
        try:
            managed.reply()
            attributes.reply()
            origin.reply()
            outer.reply()
            client.reply()
            if wid not in (managed.value[1] if managed.property_type else ()):
                raise WindowNotFound(f"Window {wid} not found")
            if attributes.map_state != X.IsViewable:
                raise self.refuse(wid)
            if caught.get_error() is not None or not origin.same_screen:
                raise _Refused()  # the cached frame is no longer this window's
            border = int(outer.border_width)
            left, top_edge = int(origin.x) + border, int(origin.y) + border  # the client in the frame's pixmap
            if frame:
                region = Region(int(outer.x), int(outer.y), int(outer.width) + 2 * border,
                                int(outer.height) + 2 * border)
                image = self._pixels(pixmap, 0, 0, region.width, region.height)
            else:
                region = Region(int(outer.x) + left, int(outer.y) + top_edge, int(client.width), int(client.height))
                image = self._pixels(pixmap, left, top_edge, region.width, region.height)
            if len(self._frames) >= _MAX_CACHED_FRAMES:
                self._frames.clear()
            self._frames[wid] = top
            return image, region
        finally:
            if caught.get_error() is None:
                request.FreePixmap(display=d, pixmap=pixmap)
            d.free_resource_id(pixmap)
            self.d.flush()

    def _pixels(self, pixmap: int, x: int, y: int, width: int, height: int) -> Image.Image:
        assert self.shm is not None
        return self.shm.grab(pixmap, x, y, width, height)

    def cursor(self) -> Cursor:
        if self._cursor is None:
            self._cursor = CursorReader(self.display_name)
        return self._cursor.read()

    def close(self) -> None:
        if self.shm is not None:
            self.shm.close()
        if self.xcb is not None:
            with contextlib.suppress(Exception):  # a connection the server dropped reports it here
                xcb.disconnect(self.xcb)
            self.xcb = None
        if self._cursor is not None:
            self._cursor.close()
        with contextlib.suppress(Exception):
            self.d.close()  # ends the redirection: the server composites as before


def _log_failure(done: Future[bool]) -> None:
    if not done.cancelled() and done.exception() is not None:
        logger.warning("could not redirect windows for captures: %s", done.exception())


class WindowCapture:
    """Captures of single windows on one `window-capture` thread per display; owned by `Windows`."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="window-capture")
        self._conns: _Connections | None = None  # touched only on the thread

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _connect(self, display_name: str) -> bool:
        """Connections to this display (redirecting its windows); True when they are new."""
        if self._conns is not None and self._conns.display_name == display_name:
            return False
        self._drop()
        self._conns = _Connections(display_name)
        logger.info("redirected the top-level windows of %s for window captures", display_name)
        return True

    def _drop(self) -> None:
        conns, self._conns = self._conns, None
        if conns is not None:
            conns.close()

    def start(self, display_name: str) -> None:
        """Begin redirecting the display's windows on the thread now (not waited for), so that the first
        capture finds every window whole; a failure is logged, and the first capture tries again."""
        self._executor.submit(self._connect, display_name).add_done_callback(_log_failure)

    async def capture(self, session: Session, wid: int, options: ShotOptions, *, frame: bool = False) -> WindowShot:
        if await self._run(self._connect, session.display):
            await asyncio.sleep(FIRST_REDIRECT_GRACE_S)  # applications repaint what was covered
        return await self._run(self._shoot, session.display, wid, options, frame, (session.width, session.height))

    def _shoot(self, display_name: str, wid: int, options: ShotOptions, frame: bool,
               screen: tuple[int, int]) -> WindowShot:
        # A lost connection (the X server restarted) shows as any error but the caller's; reconnect once.
        policy = ReconnectOnce(
            (Exception,), kept=(DomainError,), drop=self._drop,
            retrying=lambda exc: logger.info("window capture failed on %s (%s); reconnecting", display_name, exc),
            failed=lambda exc: ScreenshotFailed(f"could not capture window {wid} on {display_name} "
                                                f"({type(exc).__name__}: {exc}); retry shortly", retry_after=1))
        began, image, region, cursor = policy.run(self._grab, display_name, wid, frame, options.show_cursor)
        shot = render(image, options, region, cursor, screen, began, time.perf_counter())
        return WindowShot(shot, wid, frame)

    def _grab(self, display_name: str, wid: int, frame: bool,
              with_cursor: bool) -> tuple[float, Image.Image, Region, Cursor | None]:
        """When the grab began, the window's pixels, where they are on the screen, and the pointer if asked."""
        began = time.perf_counter()
        try:
            self._connect(display_name)
            assert self._conns is not None
            image, region = self._conns.grab(wid, frame)
            return began, image, region, self._conns.cursor() if with_cursor else None
        except _GONE as exc:  # the caller's (a DomainError): no reconnecting
            raise WindowNotFound(f"Window {wid} is gone ({type(exc).__name__})") from exc

    async def close(self) -> None:
        """Close the connections (ending the redirection) and stop the thread."""
        await self._run(self._drop)
        await asyncio.to_thread(self._executor.shutdown, True)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="window-capture")
