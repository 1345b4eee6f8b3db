"""A local server against web pages and other local users: the Host and Origin rules, secure by default.

The rules are unit-tested first (tests/api/security/test_browser_attacks.py plays the same attacks from a real
Chromium); then a real no-token server gets a foreign Host and a foreign Origin on every route and
both WebSockets, and a default start is checked end to end: token made, URL printed, clients find it.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from api.middleware.browser_guard import HostPattern, HostPolicy, OriginPolicy, is_same_origin, split_host
from sandbox_desktop_client import Client
from sandbox_desktop_client.local_servers import find_token
from tests.conftest import REPO, ServerProcess, assert_problem, concrete, launch_server, running_server

# -- the rules -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "parsed"), [
    ("localhost:2468", ("localhost", 2468)), ("LOCALHOST:2468", ("localhost", 2468)),
    ("localhost.:2468", ("localhost", 2468)), ("localhost", ("localhost", None)),
    ("[::1]:2468", ("::1", 2468)), ("[0:0:0:0:0:0:0:1]:80", ("::1", 80)), ("[::1]", ("::1", None)),
    ("127.0.0.1:2468", ("127.0.0.1", 2468)), ("Sd.Example.COM.", ("sd.example.com", None)),
])
def test_hosts_are_read_in_every_spelling(value: str, parsed: tuple[str, int | None]) -> None:
    assert split_host(value) == parsed


@pytest.mark.parametrize("value", ["", "::1", "::1:2468", "[::1", "[nothost]:80", "[::1]x", "localhost:", "a:b",
                                   "localhost:99999", "localhost:\uff12\uff14\uff16\uff18", "user@localhost:2468",
                                   "local host", "a/b:80", "localhost:-1"])
def test_malformed_hosts_are_not_hosts(value: str) -> None:
    assert split_host(value) is None


LOOPBACK = HostPolicy.for_bind("127.0.0.1", 2468, ())


@pytest.mark.parametrize("host", ["localhost:2468", "LocalHost:2468", "localhost.:2468", "app.localhost:2468",
                                  "a.b.localhost:2468", "127.0.0.1:2468", "[::1]:2468", "[0::1]:2468"])
def test_a_loopback_server_answers_to_loopback_names_on_its_port(host: str) -> None:
    assert LOOPBACK.allows(host, "http") and LOOPBACK.allows(host, "ws")


@pytest.mark.parametrize("host", [None, "", "attacker.example:2468", "attacker.example", "localhost:2469",
                                  "127.0.0.1", "localhost", "127.0.0.2:2468", "localhost.attacker.example:2468",
                                  "attackerlocalhost:2468", "[::2]:2468", "10.0.0.5:2468", "0.0.0.0:2468",
                                  "localhost..:2468", "127.0.0.1:2468, attacker.example"])
def test_a_loopback_server_refuses_every_other_host(host: str | None) -> None:
    assert not LOOPBACK.allows(host, "http")


def test_a_loopback_server_on_port_80_needs_no_port_in_the_host() -> None:
    policy = HostPolicy.for_bind("127.0.0.1", 80, ())
    assert policy.allows("localhost", "http") and policy.allows("localhost:80", "ws")
    assert not policy.allows("localhost", "https")  # https's default port is 443


def test_allowed_host_patterns() -> None:
    policy = HostPolicy.for_bind("::1", 2468, ("sd.example.com", "*.corp.example:8443", "[fd00::7]"))
    assert policy.allows("[::1]:2468", "http") and policy.allows("localhost:2468", "http")
    assert policy.allows("sd.example.com", "https") and policy.allows("SD.example.com.:9000", "http")
    assert policy.allows("a.corp.example:8443", "http") and policy.allows("b.a.corp.example:8443", "http")
    assert not policy.allows("a.corp.example:443", "https") and not policy.allows("corp.example:8443", "http")
    assert policy.allows("[fd00::7]:1", "http") and not policy.allows("[fd00::8]:2468", "http")
    assert not policy.allows("xsd.example.com", "http") and not policy.allows("192.0.2.1:2468", "http")
    assert HostPolicy.for_bind("127.0.0.1", 2468, ("*",)).allows("anything.example", "http")


@pytest.mark.parametrize("pattern", ["", "*.", "a*.example", "*.*.example", "*.127.0.0.1", "[::1", "a:b:c",
                                     "host:port", "a/b"])
def test_malformed_patterns_are_refused_at_start(pattern: str) -> None:
    with pytest.raises(ValueError):
        HostPattern.parse(pattern)


def test_other_binds_check_names_only_when_asked() -> None:
    assert HostPolicy.for_bind("0.0.0.0", 2468, ()).allows("anything.example", "http")
    policy = HostPolicy.for_bind("0.0.0.0", 2468, ("sd.ns.svc.cluster.local",))
    assert policy.allows("sd.ns.svc.cluster.local:2468", "http") and policy.allows("localhost:2468", "http")
    # Probes and Services address a pod by IP; an IP literal cannot be rebound to us by a web page.
    assert policy.allows("10.1.2.3:2468", "http") and policy.allows("[fd00::1]:2468", "http")
    assert not policy.allows("attacker.example:2468", "http") and not policy.allows("10.1.2.3:9", "http")
    specific = HostPolicy.for_bind("192.0.2.10", 2468, ("sd.example",))
    assert specific.allows("192.0.2.10:2468", "http") and not specific.allows("evil.example:2468", "http")


@pytest.mark.parametrize(("origin", "host"), [
    ("http://127.0.0.1:2468", "127.0.0.1:2468"), ("http://LOCALHOST:2468", "localhost:2468"),
    ("http://[::1]:2468", "[::1]:2468"), ("http://sd.example", "sd.example"), ("http://sd.example:80", "sd.example"),
    ("https://sd.example", "sd.example"),  # behind a TLS proxy the page is https, the request to us http
    ("https://sd.example:8443", "sd.example:8443"), ("http://sd.example", "sd.example:80"),
    ("http://localhost.:2468", "localhost:2468"),
])
def test_the_servers_own_origin_is_same_origin(origin: str, host: str) -> None:
    assert is_same_origin(origin, host)
    assert OriginPolicy().allows(origin, host)


@pytest.mark.parametrize(("origin", "host"), [
    ("http://evil.example", "127.0.0.1:2468"), ("http://127.0.0.1:2469", "127.0.0.1:2468"),
    ("http://localhost:2468", "127.0.0.1:2468"), ("null", "127.0.0.1:2468"), ("file://", "127.0.0.1:2468"),
    ("http://127.0.0.1", "127.0.0.1:2468"), ("http://sd.example:8080", "sd.example"), ("", "127.0.0.1:2468"),
    ("http://127.0.0.1:2468/path", "127.0.0.1:2468"), ("chrome-extension://abc", "abc"),
    ("http://127.0.0.1:2468", None), ("http://127.0.0.1:x", "127.0.0.1:2468"),
])
def test_other_origins_are_not_ours(origin: str, host: str | None) -> None:
    assert not OriginPolicy().allows(origin, host)


def test_the_allow_list_admits_its_origins_in_any_case() -> None:
    policy = OriginPolicy.from_cors(("http://App.example:3000/",))
    assert policy.allows("http://app.example:3000", "127.0.0.1:2468")
    assert not policy.allows("http://app.example:3001", "127.0.0.1:2468")
    assert OriginPolicy.from_cors(("*",)).allows("http://anything.example", "127.0.0.1:2468")


# -- a real server: every route, both WebSockets -----------------------------------------------------


def read_head(sock: socket.socket) -> bytes:
    """What arrives until the end of an HTTP head (and whatever followed it in the same reads); less if the
    peer closes first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def handshake(url: str, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """A WebSocket handshake sent by hand (Host and Origin exactly as given): status and body."""
    parts = urlsplit(url)
    assert parts.hostname and parts.port
    lines = [f"GET {path} HTTP/1.1", "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", *(f"{k}: {v}" for k, v in headers.items())]
    if "Host" not in headers:
        lines.append(f"Host: {parts.hostname}:{parts.port}")
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        data = read_head(sock)
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    return int(head.split(b" ")[1]), body


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The case of the report: a no-token server on loopback with a desktop (so the live view answers)."""
    with running_server(tmp_path_factory.mktemp("open"), "--no-token", token=None,
                        desktop={"displayNum": 431, "width": 800, "height": 600}) as server:
        with server.client() as api:
            assert api.post("/v1/desktop/stream/start").status_code == 200
        yield server


def refusals(server: ServerProcess, routes: list[tuple[str, str]], header: str, values: list[str],
             status: int, code: str, named: str) -> list[str]:
    """Every route (and WebSocket) asked with `header: value` for each value; what was not refused with
    `status` and `code`, the problem naming the value in its member `named`."""
    port = urlsplit(server.url).port
    failures: list[str] = []
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for value in (v.format(port=port) for v in values):
            for method, path in routes:
                if method == "WS":
                    answer, body = handshake(server.url, concrete(path), {header: value})
                    problem = json.loads(body)
                else:
                    response = client.request(method, concrete(path), headers={header: value},
                                              content=b"{}" if method in ("POST", "PUT", "PATCH") else None)
                    answer = response.status_code
                    problem = response.json() if method != "HEAD" else {"code": code, named: value}
                if answer != status or problem.get("code") != code or problem.get(named) != value:
                    failures.append(f"{method} {path} with {header} {value}: {answer} {problem}")
    return failures


FOREIGN_HOSTS = ["attacker.example:{port}", "attacker.example", "localhost:1", "127.0.0.1.nip.example:{port}"]
FOREIGN_ORIGINS = ["http://evil.example", "http://127.0.0.1:1", "null", "http://localhost.evil.example:{port}"]


def test_a_foreign_host_is_refused_on_every_route(open_server: ServerProcess, routes: list[tuple[str, str]]) -> None:
    failures = refusals(open_server, routes, "Host", FOREIGN_HOSTS, 421, "host_not_allowed", "host")
    assert not failures, "\n".join(failures)
    assert "Traceback" not in open_server.log()


def test_a_foreign_origin_is_refused_on_every_route(open_server: ServerProcess,
                                                    routes: list[tuple[str, str]]) -> None:
    failures = refusals(open_server, routes, "Origin", FOREIGN_ORIGINS, 403, "origin_not_allowed", "origin")
    assert not failures, "\n".join(failures)
    assert "Traceback" not in open_server.log()


def test_nothing_was_run_by_the_refused_requests(open_server: ServerProcess) -> None:
    """The refusals above came before any route: no process was started by them."""
    with open_server.client() as api:
        owners = {p["owner"] for p in api.get("/v1/processes").json()["processes"]}
    assert owners <= {"desktop"}, owners


def test_the_servers_own_pages_and_clients_without_an_origin_work(open_server: ServerProcess) -> None:
    port = urlsplit(open_server.url).port
    with httpx.Client(base_url=open_server.url, timeout=30) as client:
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"sd.localhost:{port}"):
            own = {"Host": host, "Origin": f"http://{host}"}
            assert client.get("/ui/", headers={"Host": host}).status_code == 200
            assert client.post("/v1/desktop/clipboard", json={"text": host}, headers=own).status_code == 200
        assert client.post("/v1/desktop/clipboard", json={"text": "no origin"}).status_code == 200
        assert client.get("/v1/desktop/clipboard").json()["text"] == "no origin"
    status, _ = handshake(open_server.url, "/v1/desktop/stream/signaling",
                          {"Origin": f"http://127.0.0.1:{port}"})
    assert status == 101


def test_an_allowed_host_from_the_environment(tmp_path: Path) -> None:
    server = launch_server(tmp_path, "--no-token", token=None,
                           env={"SANDBOX_DESKTOP_ALLOWED_HOSTS": "sd.example, *.apps.example"})
    try:
        for host, status in (("sd.example", 200), ("x.apps.example:443", 200), ("evil.example", 421)):
            assert httpx.get(server.url + "/v1/health", headers={"Host": host}, timeout=10).status_code == status
    finally:
        server.stop()


def test_a_malformed_allowed_host_stops_the_start(tmp_path: Path) -> None:
    server = launch_server(tmp_path, "--allowed-host", "a*.example", wait=False)
    assert server.proc.wait(20) == 2
    assert "--allowed-host" in server.log() and "a*.example" in server.log()


# -- secure by default -------------------------------------------------------------------------------


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "api.cli.main", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)


def test_a_default_start_makes_a_token_that_local_clients_find(tmp_path: Path) -> None:
    server = launch_server(tmp_path, token=None)
    try:
        token_file = server.state_dir / "token"
        token = token_file.read_text().strip()
        assert len(token) >= 40 and stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert f"{server.url}/ui/#token={token}" in server.log()
        assert_problem(httpx.get(server.url + "/v1/desktop/status", timeout=10), 401, "token_invalid")
        env = {k: v for k, v in os.environ.items() if k != "SANDBOX_DESKTOP_TOKEN"}
        env["XDG_STATE_HOME"] = str(tmp_path / "xdg-state")
        record = tmp_path / "xdg-state" / "sandbox-desktop" / "servers" / f"{urlsplit(server.url).port}.json"
        assert stat.S_IMODE(record.stat().st_mode) == 0o600
        assert stat.S_IMODE(record.parent.stat().st_mode) == 0o700
        status = cli("status", "--url", server.url, env=env)
        assert status.returncode == 0 and "state: inactive" in status.stdout, status.stderr
        viewer = cli("viewer", "--url", server.url, env=env)
        assert viewer.stdout.strip() == f"{server.url}/ui/#token={token}"
        ready = cli("ready", "--url", server.url, env=env)
        assert "not been started" in ready.stderr, ready.stderr  # authorised: the desktop is simply not up
        # Another user's server, or another port: nothing is found, so nothing is sent.
        stranger = {**env, "XDG_STATE_HOME": str(tmp_path / "elsewhere")}
        assert cli("status", "--url", server.url, env=stranger).returncode == 1
        assert cli("status", "--url", server.url.replace("127.0.0.1", "localhost"), env=env).returncode == 0
        previous = os.environ.get("XDG_STATE_HOME")
        os.environ["XDG_STATE_HOME"] = env["XDG_STATE_HOME"]
        try:
            assert find_token(server.url) == token and find_token(server.url + "1") is None
            assert find_token(server.url.replace("127.0.0.1", "192.0.2.1")) is None  # never sent off the machine
            with Client(server.url) as client:  # the Python client, and so the MCP server, find it too
                assert client.status().state == "inactive"
        finally:
            if previous is None:
                del os.environ["XDG_STATE_HOME"]
            else:
                os.environ["XDG_STATE_HOME"] = previous
    finally:
        server.stop()
    assert not record.exists(), "the record of a stopped server is withdrawn"


def test_the_generated_token_is_kept_across_restarts_unless_others_could_read_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = launch_server(tmp_path, "--state-dir", str(state), token=None)
    first.stop()
    token = (state / "token").read_text().strip()
    second = launch_server(tmp_path, "--state-dir", str(state), token=None)
    second.stop()
    assert (state / "token").read_text().strip() == token  # a bookmarked inspector URL keeps working
    (state / "token").chmod(0o644)
    third = launch_server(tmp_path, "--state-dir", str(state), token=None)
    third.stop()
    assert (state / "token").read_text().strip() != token
    assert stat.S_IMODE((state / "token").stat().st_mode) == 0o600


def test_no_token_keeps_the_open_server_with_a_warning(tmp_path: Path) -> None:
    server = launch_server(tmp_path, "--no-token", token=None)
    try:
        assert httpx.get(server.url + "/v1/desktop/status", timeout=10).status_code == 200
        warnings = [line for line in server.log().splitlines() if "warning: --no-token" in line]
        assert len(warnings) == 1, server.log()
        assert not (server.state_dir / "token").exists()
        assert not (tmp_path / "xdg-state" / "sandbox-desktop" / "servers").exists()
    finally:
        server.stop()
