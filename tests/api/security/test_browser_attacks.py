"""What a web page in a real Chromium can do to a local server: nothing, unless the server allows its origin.

The attacker is this test: a tiny proxy of its own on loopback serves the attack page and relays every
other request, byte for byte and with the Host the browser sent, to the server under test. So:
- the page at `http://127.0.0.1:PROXY/` is another local origin: it tries WebSockets to the live
  view's signalling and to a process terminal, and fetches that start a process or stop the desktop;
- the same page at `http://rebind.test:PROXY/` (Chromium resolves `rebind.test` to 127.0.0.1, as a
  DNS rebinding attack would) is same-origin with everything the proxy relays: its requests reach
  the server with `Host: rebind.test:PROXY`.
Every attempt must be refused, and have no effect (checked through the API and on disk). The same
page on an origin allowed with `-O` connects. docs/security.md describes the threat model.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.security.test_local_safety import read_head
from tests.conftest import ServerProcess, launch_server, wait_for
from tests.support.browser import Browser, Page, chromium_path

pytestmark = pytest.mark.skipif(chromium_path() is None,
                                reason="chromium is not installed (apt-get install chromium): these tests drive a "
                                       "real browser")

REBIND = "rebind.test"
ATTACK_PAGE = b"""<!doctype html><meta charset="utf-8"><title>attack</title><script>
// A WebSocket: {opened, message (the first one, if asked for), code}.
window.tryWs = (url, wantMessage) => new Promise(resolve => {
  let opened = false;
  const ws = new WebSocket(url);
  const timer = setTimeout(() => { resolve({opened, timeout: true}); ws.close(); }, 8000);
  ws.onopen = () => { opened = true; if (!wantMessage) { clearTimeout(timer); resolve({opened}); ws.close(); } };
  ws.onmessage = e => { clearTimeout(timer); resolve({opened, message: String(e.data).slice(0, 300)}); ws.close(); };
  ws.onclose = e => { clearTimeout(timer); resolve({opened, code: e.code}); };
});
// A fetch: {status, body} when the page may read the answer, {opaque} when it may not, {error} if refused.
window.tryFetch = async (url, init) => {
  try {
    const r = await fetch(url, init);
    if (r.type === "opaque") return {opaque: true};
    return {status: r.status, body: (await r.text()).slice(0, 500)};
  } catch (e) { return {error: String(e)}; }
};
window.ready = true;
</script>"""


class AttackerProxy:
    """Serves the attack page at `/attack.html` and relays every other connection to `target` unchanged."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, name="attacker-proxy", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with contextlib.closing(client):
            head = read_head(client)
            if b"\r\n\r\n" not in head:
                return
            if head.startswith((b"GET /attack.html ", b"GET /favicon.ico ")):
                body = ATTACK_PAGE if b"/attack.html" in head.split(b"\r\n")[0] else b""
                client.sendall(b"HTTP/1.1 %d OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n"
                               b"Connection: close\r\n\r\n" % (200 if body else 404, len(body)) + body)
                return
            with contextlib.closing(socket.create_connection(self.target, timeout=30)) as upstream:
                upstream.sendall(head)
                back = threading.Thread(target=self._pump, args=(upstream, client), daemon=True)
                back.start()
                self._pump(client, upstream)
                back.join(30)

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._closed = True
        self.listener.close()


def start_desktop_with_a_terminal(server: ServerProcess, display_num: int) -> str:
    """Start the desktop and its live view; return the id of a tty process (for the terminal WebSocket)."""
    with server.client() as api:
        assert api.post("/v1/desktop/start", json={"displayNum": display_num, "width": 640, "height": 480}).json()[
            "state"] == "active"
        assert api.post("/v1/desktop/stream/start").status_code == 200
        process = api.post("/v1/processes", json={"command": "cat", "tty": True, "interactive": True})
        assert process.status_code == 200, process.text
        return str(process.json()["id"])


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    b = Browser.launch(extra=(f"--host-resolver-rules=MAP {REBIND} 127.0.0.1",))
    yield b
    b.close()


@pytest.fixture(scope="module")
def victim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    """The case of the report: an open (no-token) server on loopback, desktop and live view running."""
    server = launch_server(tmp_path_factory.mktemp("victim"), "--no-token", token=None)
    yield server, start_desktop_with_a_terminal(server, 437)
    server.stop()


@pytest.fixture(scope="module")
def proxy(victim: tuple[ServerProcess, str]) -> Iterator[AttackerProxy]:
    p = AttackerProxy(("127.0.0.1", int(victim[0].url.rsplit(":", 1)[1])))
    yield p
    p.close()


def open_page(browser: Browser, url: str) -> Page:
    page = browser.new_page(url)
    page.wait_for("window.ready === true", "the attack page")
    return page


def run_command(marker: Path) -> str:
    return json.dumps({"method": "POST", "headers": {"Content-Type": "application/json"},
                       "body": json.dumps({"command": "touch", "args": [str(marker)]})})


def failure(result: Any, page: Page, server: ServerProcess) -> str:
    """What a page's script got, with what the browser logged (the CORS rule or network error behind a "Failed to
    fetch"), whether the server still runs, and the end of its log."""
    running = "running" if server.proc.poll() is None else f"exited with {server.proc.returncode}"
    return (f"{result}\nbrowser: {page.errors() + page.browser_log()}\nserver {running}, its log ends:\n"
            f"{server.log()[-3000:]}")


def desktop_state(server: ServerProcess) -> Any:
    with server.client() as api:
        return api.get("/v1/desktop/status").json()["state"]


def test_another_local_origin_gets_nothing(browser: Browser, victim: tuple[ServerProcess, str],
                                          proxy: AttackerProxy, tmp_path: Path) -> None:
    server, terminal = victim
    page = open_page(browser, f"http://127.0.0.1:{proxy.port}/attack.html")
    ws_base = server.url.replace("http://", "ws://")
    signalling = page.evaluate(f"tryWs({json.dumps(ws_base + '/v1/desktop/stream/signaling')}, true)")
    assert signalling == {"opened": False, "code": 1006}, signalling
    shell = page.evaluate(f"tryWs({json.dumps(f'{ws_base}/v1/processes/{terminal}/terminal/ws')}, false)")
    assert shell == {"opened": False, "code": 1006}, shell
    marker = tmp_path / "ran-from-another-origin"
    ran = page.evaluate(f"tryFetch({json.dumps(server.url + '/v1/processes/run')}, {run_command(marker)})")
    assert "error" in ran, ran  # the preflight is refused, so the POST is never sent
    # A "simple" request needs no preflight: the browser sends it, and only the server can refuse it.
    stop = page.evaluate(f"tryFetch({json.dumps(server.url + '/v1/desktop/stop')}, "
                         "{method: 'POST', mode: 'no-cors'})")
    assert stop == {"opaque": True}, stop
    screenshot = page.evaluate(f"tryFetch({json.dumps(server.url + '/v1/desktop/screenshot')}, {{}})")
    assert "error" in screenshot, screenshot  # and nothing can be read
    assert not marker.exists()
    assert desktop_state(server) == "active", "a cross-site POST stopped the desktop"
    assert "Traceback" not in server.log()


def test_a_rebound_name_gets_nothing(browser: Browser, victim: tuple[ServerProcess, str],
                                     proxy: AttackerProxy, tmp_path: Path) -> None:
    server, terminal = victim
    page = open_page(browser, f"http://{REBIND}:{proxy.port}/attack.html")  # same origin as what it relays
    status = page.evaluate("tryFetch('/v1/desktop/status', {})")
    assert status["status"] == 421 and json.loads(status["body"])["code"] == "host_not_allowed", status
    marker = tmp_path / "ran-after-rebinding"
    ran = page.evaluate(f"tryFetch('/v1/processes/run', {run_command(marker)})")
    assert ran["status"] == 421, ran
    stop = page.evaluate("tryFetch('/v1/desktop/stop', {method: 'POST'})")
    assert stop["status"] == 421, stop
    ws_base = f"ws://{REBIND}:{proxy.port}"
    sockets = (("/v1/desktop/stream/signaling", True), (f"/v1/processes/{terminal}/terminal/ws", False))
    for path, want_message in sockets:
        attempt = page.evaluate(f"tryWs({json.dumps(ws_base + path)}, {json.dumps(want_message)})")
        assert attempt == {"opened": False, "code": 1006}, (path, attempt)
    assert not marker.exists()
    assert desktop_state(server) == "active"


def test_an_origin_allowed_with_O_connects(browser: Browser, tmp_path_factory: pytest.TempPathFactory,
                                           tmp_path: Path) -> None:
    """The same page, on an origin the server allows: everything above works (so the refusals were the rules)."""
    page_proxy = AttackerProxy(("127.0.0.1", 9))  # serves the page only
    origin = f"http://127.0.0.1:{page_proxy.port}"
    server = launch_server(tmp_path_factory.mktemp("allowed"), "--no-token", "-O", origin, token=None)
    try:
        terminal = start_desktop_with_a_terminal(server, 438)
        page = open_page(browser, f"{origin}/attack.html")
        ws_base = server.url.replace("http://", "ws://")
        signalling = page.evaluate(f"tryWs({json.dumps(ws_base + '/v1/desktop/stream/signaling')}, true)")
        assert signalling["opened"] and signalling["message"].startswith('{"event": "system/init"'), failure(
            signalling, page, server)
        shell = page.evaluate(f"tryWs({json.dumps(f'{ws_base}/v1/processes/{terminal}/terminal/ws')}, false)")
        assert shell == {"opened": True}, failure(shell, page, server)
        marker = tmp_path / "ran-from-an-allowed-origin"
        ran = page.evaluate(f"tryFetch({json.dumps(server.url + '/v1/processes/run')}, {run_command(marker)})")
        assert ran.get("status") == 200, failure(ran, page, server)
        wait_for(marker.exists, "the command run from the allowed page")
        assert httpx.get(server.url + "/v1/health", timeout=10).status_code == 200
    finally:
        server.stop()
        page_proxy.close()
