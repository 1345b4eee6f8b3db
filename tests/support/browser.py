"""A real Chromium for tests, driven over the DevTools protocol; and a private network for its WebRTC.

`Browser.launch()` starts Debian's headless `chromium` with a fresh profile and talks to it over
`--remote-debugging-pipe` (JSON messages separated by NUL on fds 3 and 4): no port, no extra
package, and it works from inside a network namespace, where a DevTools port on the namespace's
own loopback would be out of reach. `Page` evaluates JS, waits for conditions, clicks and takes
screenshots.

Chromium gathers no ICE candidates on loopback, so a WebRTC test needs a non-loopback interface.
`PrivateNetwork` makes one that touches nothing else: a new network namespace joined to this one
by a veth pair with two private addresses (IPv6 off), so the browser inside can reach only the
other end of the pair and its own loopback. `Forwarder` relays a port on the outer end to a
loopback server, so the server under test keeps listening on 127.0.0.1.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import itertools
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

# Headless, software-only, and quiet: no background traffic of its own (updates, sync, QUIC,
# mDNS-hidden candidates), and no throttling of timers and video in a page nobody looks at.
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-domain-reliability", "--disable-client-side-phishing-detection", "--disable-default-apps",
    "--disable-breakpad", "--no-default-browser-check", "--no-pings",
    "--disable-features=WebRtcHideLocalIpsWithMdns,Translate,MediaRouter,OptimizationHints",
    "--autoplay-policy=no-user-gesture-required",
    "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
    "--remote-debugging-pipe",
)
VIEWPORT = (1280, 900)


def chromium_path() -> str | None:
    """Debian's `chromium` (the wrapper in /usr/bin), if installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class DevToolsError(RuntimeError):
    """A DevTools command failed, or the page threw."""


class DevTools:
    """The protocol over two pipes: `call()` blocks for the answer; events are kept for `wait_event()`."""

    def __init__(self, to_browser: int, from_browser: int) -> None:
        self._out = os.fdopen(to_browser, "wb", buffering=0)
        self._in = os.fdopen(from_browser, "rb", buffering=0)
        self._ids = itertools.count(1)
        self._pending: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="devtools-reader", daemon=True)
        self._reader.start()

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 30) -> dict[str, Any]:
        ident = next(self._ids)
        answer: queue.Queue[dict[str, Any]] = queue.Queue(1)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        with self._lock:
            if self._closed:
                raise DevToolsError(f"{method}: the browser is gone")
            self._pending[ident] = answer
            self._out.write(json.dumps(message).encode() + b"\0")
        try:
            reply = answer.get(timeout=timeout)
        except queue.Empty:
            raise DevToolsError(f"{method}: no answer in {timeout} s") from None
        finally:
            self._pending.pop(ident, None)
        if "error" in reply:
            raise DevToolsError(f"{method}: {reply['error'].get('message')} {reply['error'].get('data', '')}")
        return dict(reply.get("result", {}))

    def events(self, method: str, session: str | None = None) -> list[dict[str, Any]]:
        with self._changed:
            return [e["params"] for e in self._events
                    if e.get("method") == method and (session is None or e.get("sessionId") == session)]

    def _read(self) -> None:
        buffer = b""
        for _ in range(10**9):  # until the browser closes its end
            chunk = self._in.read(65536)
            if not chunk:
                break
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                if "id" in message:
                    waiter = self._pending.get(message["id"])
                    if waiter is not None:
                        waiter.put(message)
                else:
                    with self._changed:
                        self._events.append(message)
                        self._changed.notify_all()
        with self._lock:
            self._closed = True
        for waiter in list(self._pending.values()):
            waiter.put({"error": {"message": "the browser exited"}})

    def close(self) -> None:
        for stream in (self._out, self._in):
            with contextlib.suppress(OSError):
                stream.close()


class Page:
    """One tab, attached with its own session."""

    def __init__(self, devtools: DevTools, target: str, session: str) -> None:
        self.devtools = devtools
        self.target = target
        self.session = session

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30) -> dict[str, Any]:
        return self.devtools.call(method, params, self.session, timeout)

    def goto(self, url: str, timeout: float = 15) -> None:
        self.call("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete'", f"{url} to load", timeout)

    def evaluate(self, expression: str, timeout: float = 15) -> Any:
        """The value of a JS expression (awaited if it is a promise), as JSON."""
        result = self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                "returnByValue": True}, timeout=timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise DevToolsError(f"{expression[:80]!r} threw: {text}")
        return result["result"].get("value")

    def wait_for(self, expression: str, what: str, timeout: float = 10) -> Any:
        """Poll a JS expression until it is truthy (returned), or fail naming `what` and the page's errors."""
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {what} (last value {value!r}); "
                             f"page errors: {self.errors()}")

    def click(self, x: float, y: float, button: str = "left") -> None:
        """A real (trusted) click at viewport coordinates: move, press, release."""
        self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": button, "clickCount": 1})

    def screenshot(self, path: Path | None = None) -> bytes:
        data = base64.b64decode(self.call("Page.captureScreenshot", {"format": "png"})["data"])
        if path is not None:
            path.write_bytes(data)
        return data

    def errors(self) -> list[str]:
        """Uncaught exceptions and console errors so far (for failure messages)."""
        found = [e["exceptionDetails"].get("exception", {}).get("description") or e["exceptionDetails"]["text"]
                 for e in self.devtools.events("Runtime.exceptionThrown", self.session)]
        for e in self.devtools.events("Runtime.consoleAPICalled", self.session):
            if e.get("type") == "error":
                found.append(" ".join(str(a.get("value", a.get("description", ""))) for a in e.get("args", [])))
        return found

    def browser_log(self) -> list[str]:
        """The browser's own error reports so far: a script sees only "Failed to fetch" where this says which CORS
        rule or network error (net::ERR_...) it was. Not errors of the page: a missing favicon is one too."""
        return [f"{e['entry'].get('text')} ({e['entry'].get('url', '')})"
                for e in self.devtools.events("Log.entryAdded", self.session) if e["entry"].get("level") == "error"]


class Browser:
    """A headless Chromium of our own (fresh profile, own process group); `close()` ends all of it."""

    def __init__(self, proc: subprocess.Popen[bytes], devtools: DevTools, profile: Path, log: Path) -> None:
        self.proc = proc
        self.devtools = devtools
        self.profile = profile
        self.log = log

    @classmethod
    def launch(cls, *, netns: str | None = None, extra: tuple[str, ...] = ()) -> Browser:
        """Start Chromium (inside network namespace `netns` if given)."""
        executable = chromium_path()
        if executable is None:
            raise RuntimeError("chromium is not installed (apt-get install chromium)")
        profile = Path(tempfile.mkdtemp(prefix="sd-chromium-"))
        log = profile.with_name(profile.name + ".log")
        # fds 3 and 4 are the protocol pipes. They start above 9 so `3<&n 4>&m` cannot clash; bash,
        # because dash takes no fd number above 9.
        to_read, to_write = _high_pipe()
        from_read, from_write = _high_pipe()
        argv = [executable, *FLAGS, f"--user-data-dir={profile}",
                f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}", *extra, "about:blank"]
        if netns:
            argv = ["ip", "netns", "exec", netns, *argv]
        shell = f'exec "$@" 3<&{to_read} 4>&{from_write} {to_read}<&- {from_write}>&-'
        with open(log, "wb") as out:
            proc = subprocess.Popen(["bash", "-c", shell, "bash", *argv], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, pass_fds=(to_read, from_write),
                                    start_new_session=True)
        os.close(to_read)
        os.close(from_write)
        browser = cls(proc, DevTools(to_write, from_read), profile, log)
        try:
            browser.devtools.call("Browser.getVersion", timeout=20)
        except Exception:
            output = browser.output()
            browser.close()
            raise RuntimeError(f"chromium did not start: {output[-2000:]}") from None
        return browser

    def output(self) -> str:
        """What Chromium printed (stdout and stderr)."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def new_page(self, url: str = "about:blank") -> Page:
        target = self.devtools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.devtools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self.devtools, target, session)
        page.call("Page.enable")
        page.call("Runtime.enable")
        page.call("Log.enable")  # the browser's own reports: a CORS refusal, a fetch's network error (net::ERR_...)
        page.call("Emulation.setDeviceMetricsOverride", {"width": VIEWPORT[0], "height": VIEWPORT[1],
                                                        "deviceScaleFactor": 1, "mobile": False})
        if url != "about:blank":
            page.goto(url)
        return page

    def close(self) -> None:
        """Ask politely, then end the whole process group (renderers, GPU and zygote processes)."""
        with contextlib.suppress(Exception):
            self.devtools.call("Browser.close", timeout=3)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self.devtools.close()
        shutil.rmtree(self.profile, ignore_errors=True)
        self.log.unlink(missing_ok=True)


def _high_pipe() -> tuple[int, int]:
    read, write = os.pipe()
    high = (fcntl.fcntl(read, fcntl.F_DUPFD_CLOEXEC, 10), fcntl.fcntl(write, fcntl.F_DUPFD_CLOEXEC, 10))
    os.close(read)
    os.close(write)
    return high


# -- a private network for WebRTC ---------------------------------------------------------------

class PrivateNetwork:
    """Namespace `name` joined to this one by a veth pair: `outer` here, `inner` inside (a /30)."""

    SUBNET_BASE = "10.213"

    def __init__(self, name: str, outer: str, inner: str, outer_link: str) -> None:
        self.name = name
        self.outer = outer
        self.inner = inner
        self.outer_link = outer_link

    @classmethod
    @contextlib.contextmanager
    def create(cls) -> Iterator[PrivateNetwork]:
        """Make the namespace and the pair (needs root and iproute2); removed on exit."""
        tag = f"{os.getpid() % 100000}"
        name, outer_link, inner_link = f"sdui{tag}", f"sdui{tag}o", f"sdui{tag}i"
        block = _free_block(cls.SUBNET_BASE)
        outer, inner = f"{cls.SUBNET_BASE}.{block}.1", f"{cls.SUBNET_BASE}.{block}.2"
        _ip("netns", "add", name)
        try:
            _ip("link", "add", outer_link, "type", "veth", "peer", "name", inner_link)
            _ip("link", "set", inner_link, "netns", name)
            # No IPv6 on the pair: no link-local addresses, so no candidate can be routed anywhere else.
            switch = Path(f"/proc/sys/net/ipv6/conf/{outer_link}/disable_ipv6")
            if switch.exists():  # absent when the kernel has no IPv6 at all
                switch.write_text("1")
                _ns(name, "sh", "-c", "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6")
            _ip("addr", "add", f"{outer}/30", "dev", outer_link)
            _ip("link", "set", outer_link, "up")
            _ns(name, "ip", "addr", "add", f"{inner}/30", "dev", inner_link)
            _ns(name, "ip", "link", "set", inner_link, "up")
            _ns(name, "ip", "link", "set", "lo", "up")
            yield cls(name, outer, inner, outer_link)
        finally:
            with contextlib.suppress(subprocess.CalledProcessError):
                _ip("link", "del", outer_link)  # takes its peer along
            _ip("netns", "del", name)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def _ns(name: str, *args: str) -> None:
    subprocess.run(["ip", "netns", "exec", name, *args], check=True, capture_output=True, timeout=10)


def _free_block(base: str) -> int:
    """A third octet whose /30 no interface here uses yet (parallel runs pick different ones)."""
    used = subprocess.run(["ip", "-4", "-o", "addr"], check=True, capture_output=True, text=True).stdout
    start = os.getpid() % 250
    for offset in range(250):
        block = (start + offset) % 250 + 1
        if f" {base}.{block}." not in used:
            return block
    raise RuntimeError(f"no free {base}.N.0/30 block")


class Forwarder:
    """Relays TCP connections from `listen` (host, port 0 = any) to `target`; threads, stopped by `close()`."""

    def __init__(self, listen_host: str, target: tuple[str, int]) -> None:
        self.target = target
        self._server = socket.create_server((listen_host, 0))
        self.address: tuple[str, int] = self._server.getsockname()[:2]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.acceptor = threading.Thread(target=self._accept, name="forwarder", daemon=True)
        self.acceptor.start()

    def _accept(self) -> None:
        for _ in range(100_000):
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            for _ in range(10**9):
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
        with self._lock:
            self._open.discard(source)
        source.close()

    def close(self) -> None:
        # Closing a listening socket does not wake a thread blocked in accept() on Linux (the port
        # would keep relaying); shutdown() does.
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        with self._lock:
            for sock in list(self._open):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()
        self.acceptor.join(5)


DESKTOP_FLAGS = ("--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-sync", "--disable-component-update", "--test-type")
"""Chromium in a desktop (not headless), quiet, as the tests launch it: no accessibility flag (the desktop adds
it, docs/accessibility.md)."""


def page_args(page: Path, profile: Path, position: str = "0,0", size: str = "900,650") -> list[str]:
    """`/v1/desktop/launch` arguments that show the local `page` in a Chromium window of its own profile."""
    return [*DESKTOP_FLAGS, f"--user-data-dir={profile}", f"--window-position={position}", f"--window-size={size}",
            page.as_uri()]


@contextlib.contextmanager
def desktop_page(api: httpx.Client, folder: Path, name: str, html: str, *, position: str = "0,0",
                 size: str = "900,650") -> Iterator[dict[str, Any]]:
    """Chromium in the desktop showing `html` (written to `folder/name`) in a profile of its own under `folder`,
    launched through `api` as a user would (`page_args`), its window waited for: the launch's answer (`processId`,
    `windowId`); the browser is killed on leaving."""
    (folder / name).write_text(html)
    launched = api.post("/v1/desktop/launch", json={"app": "chromium", "wait": True, "waitTimeoutMs": 30000,
                                                     "args": page_args(folder / name, folder / "profile",
                                                                       position, size)})
    assert launched.status_code == 200, launched.text
    body: dict[str, Any] = launched.json()
    try:
        yield body
    finally:
        api.post(f"/v1/processes/{body['processId']}/kill")
