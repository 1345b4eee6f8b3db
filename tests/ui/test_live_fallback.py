"""The inspector's live view where UDP does not get through: it falls back to the WebSocket transport.

Real headless Chromiums in a network namespace (tests/support/browser.py) whose UDP nftables drops both
ways, so WebRTC's ICE cannot connect; each loads the inspector from the server itself (through a TCP
forwarder on our end of the veth pair) and connects in the automatic transport:
- as the page is, on a private http:// address: no secure context, so no WebCodecs, and the server's
  JPEG pictures are what it draws;
- with that origin treated as secure (a Chromium flag): H.264 decoded by WebCodecs' VideoDecoder.
Each must show the desktop on its canvas and get a click to an X client (tests/support/xprobe.py).
"""

from __future__ import annotations

import http.server
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import REPO, ServerProcess, free_port, launch_server, wait_for
from tests.support.browser import Browser, Forwarder, Page, PrivateNetwork
from tests.support.inspector_fixtures import click, click_on_screen, needs_chromium, text
from tests.support.no_udp import INSPECTOR_CANVAS, canvas_state, network_without_udp, open_inspector
from tests.support.xprobe import Probe

pytestmark = needs_chromium

DESKTOP = {"displayNum": 287, "width": 800, "height": 600, "streamVideoCodec": "h264"}
PROBE = (120, 100, 360, 260)  # x, y, width, height


@pytest.fixture(scope="module")
def network() -> Iterator[PrivateNetwork]:
    """The browser's namespace, its UDP dropped both ways (TCP, the page and its WebSocket, still pass)."""
    with network_without_udp() as net:
        yield net


class AppPage:
    """Another origin's page (an app embedding the live view): served on our end of the pair, its HTML set later."""

    def __init__(self, host: str) -> None:
        self.html = ""
        page = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = page.html.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.origin = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def app_page(network: PrivateNetwork) -> Iterator[AppPage]:
    page = AppPage(network.outer)
    yield page
    page.close()


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, network: PrivateNetwork,
        app_page: AppPage) -> Iterator[ServerProcess]:
    server = launch_server(tmp_path_factory.mktemp("fallback"), "--allowed-host", network.outer,
                           "--cors-allow-origin", app_page.origin)
    try:
        with server.client() as api:
            started = api.post("/v1/desktop/start", json=DESKTOP)
            assert started.status_code == 200, started.text
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def page_url(srv: ServerProcess, network: PrivateNetwork) -> Iterator[str]:
    """The inspector's address as the browser sees it: the forwarder on our end of the pair."""
    port = urlsplit(srv.url).port
    assert port is not None
    forwarder = Forwarder(network.outer, ("127.0.0.1", port))
    host, fport = forwarder.address
    yield f"http://{host}:{fport}/ui/"
    forwarder.close()


@pytest.fixture(scope="module")
def api(srv: ServerProcess) -> Iterator[httpx.Client]:
    with srv.client() as client:
        yield client


@pytest.fixture
def probe(api: httpx.Client, tmp_path: Path) -> Iterator[Probe]:
    display = str(api.get("/v1/desktop/display/info").json()["display"])
    x, y, w, h = PROBE
    p = Probe(display, tmp_path / "events.jsonl", f"{w}x{h}+{x}+{y}")
    yield p
    p.close()


EMBEDDED = "document.querySelector('sandbox-desktop-view')"
EMBEDDED_CANVAS = f"{EMBEDDED}.shadowRoot.querySelector('canvas')"


def falls_back_and_clicks(page: Page, probe: Probe, api: httpx.Client) -> str:
    """The checks both browsers share; returns the transport label's text."""
    page.wait_for("document.getElementById('live-transport').dataset.transport === 'websocket'",
                  "the fallback to the WebSocket transport", 15)
    page.wait_for("document.getElementById('live-state').dataset.state === 'connected'", "the first picture", 15)
    label = text(page, "live-transport")
    assert label.startswith("WebSocket: WebRTC did not connect within 2 s") or \
        label.startswith("WebSocket: the WebRTC connection failed"), label
    assert page.evaluate("document.getElementById('live-video').hidden") is True
    state = wait_for(lambda: (s := canvas_state(page))["colours"] > 1 and s, "a non-blank canvas")
    assert (state["width"], state["height"]) == (800, 600)
    click(page, "live-request-control")
    wait_for(lambda: api.get("/v1/desktop/stream/status").json().get("controller"), "the page in control")
    x, y, w, h = PROBE
    target = (x + w // 2, y + h // 2)
    click_on_screen(page, INSPECTOR_CANVAS, *target)
    press = wait_for(lambda: probe.events("ButtonPress"), "the click in the X client")[0]
    assert press["button"] == 1 and abs(press["rootX"] - target[0]) <= 1 and abs(press["rootY"] - target[1]) <= 1
    return label


def test_udp_dropped_falls_back_to_jpeg_pictures_on_the_socket(srv: ServerProcess, api: httpx.Client, page_url: str,
                                                                network: PrivateNetwork, probe: Probe) -> None:
    browser = Browser.launch(netns=network.name)
    try:
        page = open_inspector(browser, page_url, srv.token)
        # A private http:// address is no secure context: no WebCodecs, so the page asks for JPEG.
        assert page.evaluate("typeof VideoDecoder") == "undefined"
        label = falls_back_and_clicks(page, probe, api)
        assert "JPEG pictures: this browser has no H.264 decoder" in label
        page.wait_for("window.inspector.live.stats.codec === 'JPEG'", "the stats naming JPEG", 5)
        page.wait_for("window.inspector.live.stats.rttMs !== null", "a ping answered on the socket", 6)
    finally:
        browser.close()
        api.post("/v1/desktop/stream/stop")


def test_udp_dropped_falls_back_to_h264_decoded_by_webcodecs(srv: ServerProcess, api: httpx.Client, page_url: str,
                                                              network: PrivateNetwork, probe: Probe) -> None:
    origin = page_url.removesuffix("/ui/")
    browser = Browser.launch(netns=network.name, extra=(f"--unsafely-treat-insecure-origin-as-secure={origin}",))
    try:
        page = open_inspector(browser, page_url, srv.token)
        assert page.evaluate("VideoDecoder.isConfigSupported({codec: 'avc1.42E01F'}).then(r => r.supported)") is True
        label = falls_back_and_clicks(page, probe, api)
        assert "JPEG" not in label
        codec = page.wait_for("window.inspector.live.stats.codec", "the stats naming the codec", 5)
        assert codec.startswith("avc1.42"), codec  # from the SPS: constrained baseline, as the encoder sends
        status = api.get("/v1/desktop/stream/status").json()
        assert (status["viewers"], status["encoders"]) == (1, 1)
    finally:
        browser.close()
        api.post("/v1/desktop/stream/stop")


def test_the_embeddable_viewer_falls_back_says_why_and_takes_control(srv: ServerProcess, api: httpx.Client,
                                                                     page_url: str, network: PrivateNetwork,
                                                                     probe: Probe) -> None:
    browser = Browser.launch(netns=network.name)
    try:
        # /ui/embed.html: <sandbox-desktop-view control> of /ui/viewer.js, its token from the address.
        page = browser.new_page(f"{page_url}embed.html#token={srv.token}")
        page.wait_for(f"{EMBEDDED}.dataset.transport === 'websocket' && {EMBEDDED}.dataset.state === 'connected'",
                      "the embedded viewer on the WebSocket transport", 20)
        label = page.evaluate(f"{EMBEDDED}.shadowRoot.querySelector('.label').textContent")
        assert label.startswith("WebSocket: WebRTC did not connect within 2 s"), label
        state = wait_for(lambda: (s := canvas_state(page, EMBEDDED_CANVAS))["colours"] > 1 and s, "a non-blank canvas")
        assert (state["width"], state["height"]) == (800, 600)
        wait_for(lambda: api.get("/v1/desktop/stream/status").json().get("controller"), "the viewer in control")
        x, y, _, _ = PROBE
        click_on_screen(page, EMBEDDED_CANVAS, x + 30, y + 40)
        press = wait_for(lambda: probe.events("ButtonPress"), "the click in the X client")[0]
        assert (press["rootX"], press["rootY"]) == (x + 30, y + 40)
    finally:
        browser.close()
        api.post("/v1/desktop/stream/stop")


def test_an_app_on_another_origin_embeds_the_viewer_on_the_websocket(srv: ServerProcess, api: httpx.Client,
                                                                     page_url: str, app_page: AppPage,
                                                                     network: PrivateNetwork, probe: Probe) -> None:
    """docs/streaming.md's embedding example, on an origin the server allows with --cors-allow-origin (the probe's
    window makes the screen more than its plain background)."""
    server = page_url.removesuffix("/ui/")
    app_page.html = (f'<!doctype html><script type="module" src="{server}/ui/viewer.js"></script>'
                     f'<sandbox-desktop-view src="{server}" token="{srv.token}" transport="websocket">'
                     '</sandbox-desktop-view>')
    browser = Browser.launch(netns=network.name)
    try:
        page = browser.new_page(f"{app_page.origin}/")
        page.wait_for(f"{EMBEDDED}?.dataset.state === 'connected'", "the embedded viewer connected", 20)
        label = page.evaluate(f"{EMBEDDED}.shadowRoot.querySelector('.label').textContent")
        assert label.startswith("WebSocket: asked for"), label
        state = wait_for(lambda: (s := canvas_state(page, EMBEDDED_CANVAS))["colours"] > 1 and s, "a non-blank canvas")
        assert (state["width"], state["height"]) == (800, 600)
        assert api.get("/v1/desktop/stream/status").json()["viewers"] == 1
    finally:
        browser.close()
        api.post("/v1/desktop/stream/stop")


def nginx_location(upstream: str) -> str:
    """docs/streaming.md's nginx `location /` block, pointed at `upstream`: the documented proxy is the one tested."""
    doc = (REPO / "docs" / "streaming.md").read_text()
    block = re.search(r"```nginx\n(.*?)```", doc, re.DOTALL)
    assert block is not None, "docs/streaming.md has no nginx example"
    location = re.search(r"(    location / \{.*?\n    \})", block.group(1), re.DOTALL)
    assert location is not None, "its nginx example has no `location /` block"
    return location.group(1).replace("http://127.0.0.1:2468", upstream)


@pytest.fixture(scope="module")
def proxied_url(srv: ServerProcess, network: PrivateNetwork, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[str]:
    """The inspector's address through nginx, an HTTP-only reverse proxy (no UDP), on our end of the pair."""
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if nginx is None:
        pytest.skip("nginx is not installed (apt-get install nginx-light; scripts/setup.sh test installs it)")
    folder = tmp_path_factory.mktemp("nginx")
    port = free_port()
    temp = "".join(f"{kind}_temp_path {folder / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                       "scgi"))
    (folder / "nginx.conf").write_text(
        f"daemon off; pid {folder / 'nginx.pid'}; error_log {folder / 'error.log'};\n"
        "events {}\n"
        f"http {{ access_log off; {temp}\n"
        "map $http_upgrade $connection_upgrade { default upgrade; '' close; }\n"
        f"server {{ listen {network.outer}:{port};\n{nginx_location(srv.url)}\n}}\n}}\n")
    proxy = subprocess.Popen([nginx, "-p", str(folder), "-c", str(folder / "nginx.conf")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: httpx.get(f"http://{network.outer}:{port}/v1/health", timeout=2).status_code == 200,
                 "nginx forwarding to the server", 10)
        yield f"http://{network.outer}:{port}/ui/"
    finally:
        proxy.terminate()
        proxy.wait(10)


def test_behind_an_http_only_reverse_proxy_the_inspector_connects_by_itself(
        srv: ServerProcess, api: httpx.Client, proxied_url: str, network: PrivateNetwork, probe: Probe) -> None:
    """docs/streaming.md's nginx configuration in front of the server, a browser without UDP: the page opened with
    its token connects by itself, over the WebSocket through the proxy, and a click reaches an app."""
    browser = Browser.launch(netns=network.name)
    try:
        page = open_inspector(browser, proxied_url, srv.token)
        falls_back_and_clicks(page, probe, api)
    finally:
        browser.close()
        api.post("/v1/desktop/stream/stop")
