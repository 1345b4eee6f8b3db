"""Security against real servers: the token on every route, secrets kept out of logs and children,
loopback by default, body size limits, hostile paths and ids, and switching off the process and file APIs.

docs/security.md describes the model these tests hold the server to.
"""

from __future__ import annotations

import ast
import asyncio
import base64
import http.client
import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from api.http.operations import MAX_JSON_BODY_BYTES
from api.middleware import auth
from api.routes.ui import UI_DIR
from streaming.viewer import signaling_url
from tests.conftest import REPO, ServerProcess, assert_problem, concrete, launch_server
from tests.support.tars import member, tar_bytes

DESKTOP = {"displayNum": 420, "width": 800, "height": 600}  # `srv`: the live view, windows and apps
PUBLIC = frozenset({"/", "/v1/health"})
"""Answered without the token; so is the static inspector under /ui (it sends the token itself)."""
SECRET_TEXT = b"outside-secret-7c1e"
HOSTILE_PATHS = ["..%2Foutside%2Fsecret.txt", "%2e%2e%2foutside%2fsecret.txt", "~%2F..%2Foutside%2Fsecret.txt",
                 "sub%2F..%2F..%2Foutside%2Fsecret.txt", "secret%00.txt", "%00"]
"""Raw (already URL-encoded) `path` values, relative to the home: all climb out of it or hold a NUL."""
HOSTILE_IDS = ["..", "%2e%2e", "..%2F..%2Foutside%2Fsecret.txt", "%2e%2e%2f%2e%2e%2fetc%2fpasswd", "%2Fetc%2Fpasswd",
               "rec_1%00", "proc_1%2F..%2F..", "%252e%252e%252f", "1%00"]


# -- fixtures and helpers ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server without a desktop whose user's home is `<tmp>/home`, next to `<tmp>/outside/secret.txt`."""
    tmp = tmp_path_factory.mktemp("security")
    (tmp / "home").mkdir()
    (tmp / "outside").mkdir()
    (tmp / "outside" / "secret.txt").write_bytes(SECRET_TEXT)
    server = launch_server(tmp, env={"HOME": str(tmp / "home")})
    yield server
    server.stop()


def is_public(path: str) -> bool:
    return path in PUBLIC or path == "/ui" or path.startswith("/ui/")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def bad_credentials(token: str) -> dict[str, dict[str, str]]:
    """Ways to not have the token, by name."""
    near = token[:-1] + ("A" if token[-1] != "A" else "B")
    basic = base64.b64encode(f"user:{token}".encode()).decode()
    return {
        "no token": {}, "wrong token": bearer(secrets.token_urlsafe(16)), "last character differs": bearer(near),
        "token minus its last character": bearer(token[:-1]), "token plus a character": bearer(token + "x"),
        "empty bearer": {"Authorization": "Bearer"}, "basic scheme": {"Authorization": f"Basic {basic}"},
        "token scheme": {"Authorization": f"Token {token}"}, "bare token": {"Authorization": token},
    }


def call(client: httpx.Client, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    """One request; bodies are malformed JSON so that no handler with a body acts on it."""
    body = b"{" if method in ("POST", "PUT", "PATCH", "DELETE") else None
    # An event stream with the right token would never end: the held events only, then the end.
    params = {"follow": "false"} if method in ("GET", "HEAD") and path.endswith("/events") else None
    return client.request(method, path, content=body, params=params,
                          headers={"content-type": "application/json", **headers})


def unauthorized_failure(response: httpx.Response, method: str) -> str | None:
    """Why `response` is not a proper 401 token problem, or None."""
    if response.status_code != 401 or not response.headers.get("www-authenticate", "").startswith("Bearer"):
        return f"{response.status_code} {response.headers.get('www-authenticate')!r}"
    if method != "HEAD":
        try:
            assert_problem(response, 401, "token_invalid")
        except AssertionError as exc:
            return str(exc)
    return None


def raw(server: ServerProcess, method: str, target: str, body: bytes | None = None) -> tuple[int, bytes]:
    """A request whose target is sent exactly as written (no dot-segment or percent normalisation)."""
    conn = http.client.HTTPConnection(server.url.removeprefix("http://"), timeout=30)
    try:
        headers = {**bearer(server.token or ""), "Content-Type": "application/json"}
        conn.request(method, target, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


async def ws_status(url: str, headers: dict[str, str] | None = None) -> int:
    """The status the signalling handshake is answered with (101 once the socket opened)."""
    try:
        async with connect(url, additional_headers=headers or {}, open_timeout=10) as ws:
            await asyncio.wait_for(ws.recv(), 10)
            return 101
    except InvalidStatus as exc:
        return exc.response.status_code


def names_field(problem: dict[str, Any], field: str) -> bool:
    """The problem's `errors` name this request field (or an item of it: `args.0`, `env.A`)."""
    fields = [str(e.get("field", "")) for e in problem.get("errors") or []]
    return any(f == field or f.startswith(field + ".") for f in fields)


def home_of(server: ServerProcess) -> Path:
    return server.state_dir.parent / "home"


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() if p.is_file() else b"" for p in directory.rglob("*")}


# -- 1. the token on every route -----------------------------------------------------------------

def test_every_route_but_the_public_ones_needs_the_token(plain: ServerProcess,
                                                         routes: list[tuple[str, str]]) -> None:
    protected = [(m, concrete(p)) for m, p in routes if m != "WS" and not is_public(p)]
    assert ("GET", "/v1/openapi.json") in protected and len(protected) > 50
    failures = []
    with httpx.Client(base_url=plain.url, timeout=30) as client:
        for method, path in protected:
            for name, headers in bad_credentials(plain.token or "").items():
                why = unauthorized_failure(call(client, method, path, headers), method)
                if why:
                    failures.append(f"{method} {path} with {name}: {why}")
            with_token = call(client, method, path, bearer(plain.token or ""))
            if with_token.status_code == 401:
                failures.append(f"{method} {path} refuses the right token")
    assert not failures, "\n".join(failures)


def test_public_routes_hold_no_data(plain: ServerProcess, routes: list[tuple[str, str]]) -> None:
    assert {p for _, p in routes if is_public(p)} == {*PUBLIC, "/ui", "/ui/"}
    assert httpx.get(plain.url + "/v1/health").json() == {"status": "ok"}
    assert httpx.get(plain.url + "/").json()["docs"] == "/v1/openapi.json"
    assert httpx.get(plain.url + "/ui").status_code == 307
    for file in UI_DIR.iterdir():  # the inspector is static files only: it fetches data with the token
        served = httpx.get(f"{plain.url}/ui/{file.name}")
        assert served.status_code == 200 and served.content == file.read_bytes(), file.name


def test_the_api_document_marks_every_protected_operation(plain: ServerProcess,
                                                          routes: list[tuple[str, str]]) -> None:
    with plain.client() as api:
        document = api.get("/v1/openapi.json").json()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert (method.upper(), path) in routes, f"{method} {path} is documented but not routed"
            assert ("security" in operation) == (path not in PUBLIC), f"{method} {path}"


def test_the_query_token_is_for_websockets_only(plain: ServerProcess) -> None:
    with httpx.Client(base_url=plain.url, timeout=30) as client:
        for method, path in (("GET", "/v1/desktop/status"), ("GET", "/v1/fs/entries"), ("POST", "/v1/processes/run")):
            response = call(client, method, f"{path}?access_token={plain.token}", {})
            assert unauthorized_failure(response, method) is None, f"{method} {path}: {response.status_code}"


def test_the_signalling_socket_needs_the_token(plain: ServerProcess) -> None:
    token = plain.token or ""

    async def scenario() -> None:
        for name, headers in bad_credentials(token).items():
            assert await ws_status(signaling_url(plain.url, None), headers) == 401, f"header, {name}"
            value = headers.get("Authorization", "")
            if value.startswith("Bearer "):
                assert await ws_status(signaling_url(plain.url, value[7:] or None)) == 401, f"query, {name}"
        # The right token passes authentication; the live view is off here, hence its 409.
        assert await ws_status(signaling_url(plain.url, token)) == 409
        assert await ws_status(signaling_url(plain.url, None), bearer(token)) == 409
    asyncio.run(scenario())
    # A refusal is a complete exchange, not an error: nothing for an operator to chase in the log.
    assert "without completing handshake" not in plain.log()


def test_the_signalling_socket_opens_with_the_token(srv: ServerProcess, api: httpx.Client) -> None:
    assert api.post("/v1/desktop/stream/start").status_code == 200
    try:
        async def scenario() -> None:
            assert await ws_status(signaling_url(srv.url, srv.token)) == 101
            assert await ws_status(signaling_url(srv.url, None), bearer(srv.token or "")) == 101
            assert await ws_status(signaling_url(srv.url, (srv.token or "")[:-1])) == 401
        asyncio.run(scenario())
    finally:
        api.post("/v1/desktop/stream/stop")


# -- 2. constant-time comparison -----------------------------------------------------------------

def token_equality_checks(path: Path) -> list[str]:
    """`==`/`!=`/`in` on a name that mentions a token, and (in api/middleware/auth.py) `==`/`!=` between two
    variables."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare):
            continue
        names = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
        names += [n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)]
        equality = any(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops)
        variables = not any(isinstance(x, ast.Constant) for x in [node.left, *node.comparators])
        mentions_token = any("token" in name.lower() for name in names)
        if (mentions_token and (equality or any(isinstance(op, ast.In | ast.NotIn) for op in node.ops))) or (
                path.name == "auth.py" and equality and variables):
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_token_is_compared_in_constant_time() -> None:
    server_side = [p for p in (REPO / "api").rglob("*.py") if p.name not in ("cli_client.py", "mcp_server.py")]
    assert [hit for p in server_side for hit in token_equality_checks(p)] == []
    assert "compare_digest" in auth.tokens_match.__code__.co_names
    assert "tokens_match" in auth.TokenCheck.refusal.__code__.co_names
    assert auth.tokens_match("s3cr\u00e9t", "s3cr\u00e9t") and not auth.tokens_match("s3cret", "s3creT")


# -- 3. the token never reaches logs, files or children ----------------------------------------

def exercise(server: ServerProcess, wrong: list[str], desktop: bool) -> None:
    """Right, wrong and misplaced tokens on HTTP and the WebSocket, plus requests that fail server-side."""
    token = server.token or ""
    with httpx.Client(base_url=server.url, timeout=60) as client:
        ok = bearer(token)
        assert client.get("/v1/desktop/status", headers=ok).status_code == 200
        assert client.put("/v1/fs/file", params={"path": "~/note.txt"}, content=b"hi", headers=ok).status_code == 200
        assert client.post("/v1/processes/run", json={"command": "true"}, headers=ok).status_code == 200
        for value in [*wrong, token]:
            client.get(f"/v1/desktop/status?access_token={value}&token={value}")
            client.get("/v1/desktop/status", headers={"Authorization": f"Token {value}"})
        for value in wrong:
            client.get("/v1/desktop/status", headers=bearer(value))
        if desktop:
            client.post("/v1/desktop/recording/start", json={}, headers=ok).raise_for_status()
            client.post("/v1/desktop/recording/stop", headers=ok).raise_for_status()
            failed = client.post(f"/v1/desktop/open?access_token={token}", json={"target": "/no/such/file"}, headers=ok)
        else:
            failed = client.post(f"/v1/desktop/start?access_token={token}", headers=ok,
                                 json={"displayNum": 429, "width": 640, "height": 480, "stateDir": "/proc/self/no"})
        assert failed.status_code >= 400

    async def sockets() -> None:
        for value in [*wrong, token]:
            await ws_status(signaling_url(server.url, value))
            await ws_status(signaling_url(server.url, None), {"Authorization": f"Token {value}"})
        await ws_status(signaling_url(server.url, None), bearer(token))
    asyncio.run(sockets())


@pytest.mark.parametrize(("level", "display"), [("info", None), ("debug", 421)])
def test_the_token_never_appears_in_logs_or_state(tmp_path: Path, level: str, display: int | None) -> None:
    (tmp_path / "home").mkdir()
    server = launch_server(tmp_path, "--log-level", level, env={"HOME": str(tmp_path / "home")})
    token = server.token or ""
    wrong = [secrets.token_urlsafe(16), token[:-1] + ("A" if token[-1] != "A" else "B")]
    try:
        if display is not None:
            with server.client() as api:
                started = api.post("/v1/desktop/start", json={"displayNum": display, "width": 640, "height": 480})
                assert started.json().get("state") == "active", started.text
                assert api.post("/v1/desktop/stream/start").status_code == 200
        exercise(server, wrong, desktop=display is not None)
    finally:
        server.stop()
    log = server.log()
    assert level != "debug" or " DEBUG " in log, "no debug lines: check the --log-level flag"
    places = {"server log": log.encode()}
    for root in (server.state_dir, tmp_path / "home"):
        places.update({str(p): p.read_bytes() for p in root.rglob("*") if p.is_file()})
    leaks = [f"{name}: {line.decode(errors='replace')}" for name, data in places.items()
             for line in data.splitlines() if token[:-1].encode() in line or wrong[0].encode() in line]
    assert not leaks, "the token (or a wrong one) was written down:\n" + "\n".join(leaks)


def test_processes_do_not_inherit_the_token(tmp_path: Path) -> None:
    token = secrets.token_urlsafe(16)
    server = launch_server(tmp_path, token=None, env={"SANDBOX_DESKTOP_TOKEN": token})
    try:
        ran = httpx.post(server.url + "/v1/processes/run", json={"command": "env"}, headers=bearer(token), timeout=30)
        assert ran.status_code == 200, ran.text
        assert token not in ran.json()["stdout"], "SANDBOX_DESKTOP_TOKEN reaches every process the server starts"
    finally:
        server.stop()


# -- 4. a token unless --no-token ----------------------------------------------------------------

@pytest.mark.parametrize("env", [{}, {"SANDBOX_DESKTOP_TOKEN": ""}])
def test_a_non_loopback_bind_without_a_token_makes_one(tmp_path: Path, env: dict[str, str]) -> None:
    """Secure by default on any address: no token given is a generated one, never an open server."""
    server = launch_server(tmp_path, "--host", "0.0.0.0", token=None, env=env)  # requests go to 127.0.0.1 only
    try:
        assert httpx.get(server.url + "/v1/desktop/status", timeout=10).status_code == 401
        token = (server.state_dir / "token").read_text().strip()
        assert httpx.get(server.url + "/v1/desktop/status", headers=bearer(token), timeout=10).status_code == 200
        assert f"#token={token}" in server.log()
    finally:
        server.stop()


@pytest.mark.parametrize("token", ["", "   "])
def test_an_empty_token_is_refused_at_startup(tmp_path: Path, token: str) -> None:
    server = launch_server(tmp_path, f"--token={token}", token=None, wait=False)
    try:
        code = server.proc.wait(20)
    finally:
        server.stop()
    assert code == 2 and "refusing an empty token" in server.log(), server.log()


# -- 5. request size limits ----------------------------------------------------------------------

def test_a_json_body_over_the_limit_is_413_and_the_server_survives(plain: ServerProcess) -> None:
    conn = http.client.HTTPConnection(plain.url.removeprefix("http://"), timeout=30)
    try:  # a declared length over the limit is refused before a byte of the body is read
        conn.putrequest("POST", "/v1/desktop/clipboard")
        for name, value in {**bearer(plain.token or ""), "Content-Type": "application/json",
                            "Content-Length": str(MAX_JSON_BODY_BYTES + 1)}.items():
            conn.putheader(name, value)
        conn.endheaders()
        assert conn.getresponse().status == 413
    finally:
        conn.close()
    oversized = b'{"text": "' + b"a" * MAX_JSON_BODY_BYTES + b'"}'

    def chunks(size: int = 1 << 20) -> Iterator[bytes]:  # no Content-Length: the limit must hold while streaming
        yield from (oversized[i:i + size] for i in range(0, len(oversized), size))
    with plain.client() as api:
        for body in (oversized, chunks()):
            problem = assert_problem(api.post("/v1/desktop/clipboard", content=body, timeout=120,
                                              headers={"content-type": "application/json"}), 413, "payload_too_large")
            assert str(MAX_JSON_BODY_BYTES) in str(problem["detail"])
        assert api.get("/v1/desktop/status").status_code == 200
    assert plain.proc.poll() is None


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs the test mounts itself."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace')}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_an_upload_larger_than_the_disk_is_413(plain: ServerProcess, small_disk: Path) -> None:
    """The file API has no size limit of its own (docs/files.md): what bounds an upload is the device."""
    (small_disk / "kept.txt").write_bytes(b"old")
    big = b"x" * (2 << 20)
    with plain.client() as api:
        assert_problem(api.put("/v1/fs/file", params={"path": str(small_disk / "kept.txt")}, content=big),
                       413, "payload_too_large")
        assert_problem(api.post("/v1/fs/upload-batch", params={"path": str(small_disk / "batch")},
                                content=tar_bytes([(member("big.bin"), big)]),
                                headers={"content-type": "application/x-tar"}), 413, "payload_too_large")
        assert api.get("/v1/desktop/status").status_code == 200
    assert sorted(p.name for p in small_disk.iterdir()) == ["kept.txt"]
    assert (small_disk / "kept.txt").read_bytes() == b"old"


# -- 6. hostile paths and ids --------------------------------------------------------------------

def test_fs_paths_cannot_climb_out_of_the_home(plain: ServerProcess) -> None:
    outside = plain.state_dir.parent / "outside"
    before = snapshot(outside)
    with plain.client() as api:
        document = api.get("/v1/openapi.json").json()
    taking_path = [(method.upper(), path) for path, ops in document["paths"].items() for method, op in ops.items()
                   if any(p["name"] == "path" and p["in"] == "query" for p in op.get("parameters", []))]
    prefixes = ("/v1/fs", "/v1/desktop/fs", "/v1/desktops/{desktop_id}/fs")
    assert {p for _, p in taking_path} == {prefix + p for prefix in prefixes
                                           for p in ("/entries", "/file", "/entry", "/mkdir", "/stat", "/upload-batch")}
    # A desktop's own (docs/files.md "Files of one desktop") resolve paths as these do (tests/api/files); this server
    # runs no desktop, so they answer 409 whatever the path.
    taking_path = [(method, path) for method, path in taking_path if path.startswith("/v1/fs/")]
    failures = []
    for method, path in [*taking_path, ("HEAD", "/v1/fs/file")]:
        body = tar_bytes([(member("pwned.txt"), b"pwned")]) if path.endswith("upload-batch") else b"pwned"
        for value in HOSTILE_PATHS:
            status, answer = raw(plain, method, f"{path}?path={value}", body if method in ("PUT", "POST") else None)
            problem = json.loads(answer) if answer else {}
            if status != 400 or (method != "HEAD" and not names_field(problem, "path")):
                failures.append(f"{method} {path}?path={value}: {status} {answer[:200]!r}")
        # Double encoding is just an odd file name, inside the home.
        status, answer = raw(plain, method, f"{path}?path=%252e%252e%252foutside", b"x" if method == "PUT" else None)
        if status >= 500 or (status < 300 and b"outside" in answer and str(home_of(plain)).encode() not in answer):
            failures.append(f"{method} {path} double-encoded: {status} {answer[:200]!r}")
    assert not failures, "\n".join(failures)
    assert snapshot(outside) == before


def test_fs_move_names_the_bad_field(plain: ServerProcess) -> None:
    with plain.client() as api:
        for body, field in (({"from": "../outside/secret.txt", "to": "stolen.txt"}, "from"),
                            ({"from": "~/note.txt", "to": "~/../outside/moved.txt"}, "to"),
                            ({"from": "a\x00b", "to": "c"}, "from"), ({"from": "a", "to": "c\x00d"}, "to")):
            assert names_field(assert_problem(api.post("/v1/fs/move", json=body), 400), field), body
    assert (plain.state_dir.parent / "outside" / "secret.txt").read_bytes() == SECRET_TEXT


def test_absolute_paths_and_symlinks_follow_the_documented_policy(plain: ServerProcess) -> None:
    """No jail (docs/files.md): absolute paths and links work; a tar never writes through a link."""
    outside = plain.state_dir.parent / "outside"
    target = home_of(plain) / "www"
    target.mkdir(exist_ok=True)
    (target / "link").unlink(missing_ok=True)
    (target / "link").symlink_to(outside)
    with plain.client() as api:
        assert api.get("/v1/fs/stat", params={"path": str(outside / "secret.txt")}).status_code == 200
        assert api.get("/v1/fs/file", params={"path": "~/www/link/secret.txt"}).content == SECRET_TEXT
        problem = assert_problem(api.post("/v1/fs/upload-batch", params={"path": "~/www"},
                                          content=tar_bytes([(member("link/pwned.txt"), b"pwned")]),
                                          headers={"content-type": "application/x-tar"}), 400)
        assert problem["member"] == "link/pwned.txt"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_ids_never_reach_files(plain: ServerProcess, routes: list[tuple[str, str]]) -> None:
    """Recording and process ids, and the inspector's static files, with traversal in every encoding."""
    with plain.client() as api:
        assert api.post("/v1/processes/run", json={"command": "true"}).status_code == 200
    templates = [(m, p) for m, p in routes if "{id}" in p and "/windows/" not in p and m != "HEAD"]
    assert len(templates) >= 12
    failures = []
    for method, template in templates:
        for ident in HOSTILE_IDS:
            target = template.replace("{id}", ident)
            status, answer = raw(plain, method, target, b"{}" if method == "POST" else None)
            if not 400 <= status < 500 or SECRET_TEXT in answer or b"root:" in answer:
                failures.append(f"{method} {target}: {status} {answer[:200]!r}")
    for target in ("/ui/../api/middleware/auth.py", "/ui/%2e%2e/auth.py", "/ui/..%2fauth.py",
                   "/ui/%2e%2e%2f%2e%2e%2fapi%2fauth.py", "/ui/..%2f..%2foutside%2fsecret.txt"):
        status, answer = raw(plain, "GET", target)
        if status != 404 or b"compare_digest" in answer:
            failures.append(f"GET {target}: {status}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("route", ["/v1/processes", "/v1/processes/run"])
def test_process_fields_with_nul_bytes_are_400_naming_the_field(plain: ServerProcess, route: str) -> None:
    with plain.client() as api:
        for field, value in (("command", "tr\x00ue"), ("cwd", "/tmp\x00x"), ("args", ["a\x00b"]),
                             ("env", {"A": "a\x00b"})):
            body = {"command": "true", field: value}
            problem = assert_problem(api.post(route, json=body), 400)
            assert names_field(problem, field), f"{route} {field}: {problem['detail']}"


def test_a_bad_state_dir_is_400_naming_it(plain: ServerProcess) -> None:
    file_in_the_way = plain.state_dir.parent / "outside" / "secret.txt"
    with plain.client() as api:
        for state_dir in ("/tmp/state\x00dir", str(file_in_the_way / "state"), "/proc/self/state", "relative/dir"):
            answer = api.post("/v1/desktop/start",
                              json={"displayNum": 429, "width": 640, "height": 480, "stateDir": state_dir})
            assert 400 <= answer.status_code < 500, f"{state_dir!r}: {answer.status_code} {answer.text}"
            assert names_field(answer.json(), "stateDir"), answer.text
    assert file_in_the_way.read_bytes() == SECRET_TEXT


def test_desktop_ids_and_targets(srv: ServerProcess, api: httpx.Client) -> None:
    """Window ids, the app to launch and the target to open, on a live desktop."""
    failures = []
    for action, body in (("focus", None), ("move", b'{"x": 1, "y": 1}'), ("resize", b'{"width": 99, "height": 99}')):
        for ident in HOSTILE_IDS:
            status, answer = raw(srv, "POST", f"/v1/desktop/windows/{ident}/{action}", body)
            if not 400 <= status < 500:
                failures.append(f"window {ident} {action}: {status} {answer[:200]!r}")
    # A relative app path: the server's PATH lookup finds it from its working directory (REPO).
    relative_app = os.path.relpath("/bin/sh", REPO)
    for route, request, field in (("/v1/desktop/open", {"target": "/tmp/a\x00b"}, "target"),
                                  ("/v1/desktop/launch", {"app": relative_app}, "app"),
                                  ("/v1/desktop/launch", {"app": "xterm\x00"}, None)):
        reply = api.post(route, json=request)
        if not 400 <= reply.status_code < 500 or (field and not names_field(reply.json(), field)):
            failures.append(f"{route} {request}: {reply.status_code} {reply.text[:200]}")
    assert not failures, "\n".join(failures)


# -- 7. switching off the process and file APIs -----------------------------------------------

OPTIONAL_APIS = {"--no-process-api": "/v1/processes", "--no-file-api": "/v1/fs"}


def assert_switched_off(server: ServerProcess, routes: list[tuple[str, str]], flag: str) -> None:
    prefix = OPTIONAL_APIS[flag]
    under = [(m, concrete(p)) for m, p in routes if p == prefix or p.startswith(prefix + "/")]
    assert under
    sockets = [server.url.replace("http://", "ws://", 1) + path for method, path in under if method == "WS"]

    async def handshakes() -> list[tuple[int, bytes]]:
        refused = []
        for url in sockets:
            assert await ws_status(url) == 401, url
            try:
                async with connect(url, additional_headers=bearer(server.token or ""), open_timeout=10):
                    pytest.fail(f"{url} opened on a server started with {flag}")
            except InvalidStatus as exc:
                refused.append((exc.response.status_code, exc.response.body or b""))
        return refused
    for status, body in asyncio.run(handshakes()):  # refused before the upgrade, with the same problem
        assert status == 403 and b"api_disabled" in body and flag.encode() in body, (status, body)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for method, path in [(m, p) for m, p in under if m != "WS"]:
            assert call(client, method, path, {}).status_code == 401, f"{method} {path} without the token"
            answer = call(client, method, path, bearer(server.token or ""))
            assert answer.status_code == 403, f"{method} {path}: {answer.status_code}"
            if method != "HEAD":
                assert flag in str(assert_problem(answer, 403, "api_disabled")["detail"])
        paths = client.get("/v1/openapi.json", headers=bearer(server.token or "")).json()["paths"]
        assert not [p for p in paths if p == prefix or p.startswith(prefix + "/")]


def assert_fs_works(api: httpx.Client) -> None:
    assert api.put("/v1/fs/file", params={"path": "~/works.txt"}, content=b"yes").status_code == 200
    assert api.get("/v1/fs/file", params={"path": "~/works.txt"}).content == b"yes"


def assert_processes_work(api: httpx.Client) -> None:
    ran = api.post("/v1/processes/run", json={"command": "echo", "args": ["works"]})
    assert ran.status_code == 200 and ran.json()["stdout"] == "works\n", ran.text


def test_a_desktop_only_server(tmp_path: Path, routes: list[tuple[str, str]]) -> None:
    server = launch_server(tmp_path, "--no-process-api", "--no-file-api")
    try:
        for flag in OPTIONAL_APIS:
            assert_switched_off(server, routes, flag)
        with server.client() as api:
            started = api.post("/v1/desktop/start", json={"displayNum": 422, "width": 640, "height": 480})
            assert started.json().get("state") == "active", started.text
            shot = api.get("/v1/desktop/screenshot")
            assert shot.status_code == 200 and shot.content.startswith(b"\x89PNG")
            assert api.post("/v1/desktop/mouse/move", json={"x": 33, "y": 44}).status_code == 200
            assert api.get("/v1/desktop/mouse/position").json()["x"] == 33
            assert api.get("/v1/desktop/windows").status_code == 200
            assert api.post("/v1/desktop/keyboard/press", json={"key": "Escape"}).status_code == 200
            # The desktop's own commands and files act inside its sandbox: the flags leave them on.
            ran = api.post("/v1/desktop/processes/run", json={"command": "id", "args": ["-u"]})
            assert ran.status_code == 200 and ran.json()["stdout"].strip() != str(os.getuid()), ran.text
            assert api.put("/v1/desktop/fs/file", params={"path": "~/note.txt"}, content=b"x").status_code == 200
            assert api.post("/v1/desktop/stop").status_code == 200
    finally:
        server.stop()


def test_without_a_sandbox_the_flags_cover_the_desktops_own_commands_and_files(tmp_path: Path) -> None:
    """Unisolated, a desktop's commands and files would act on the machine as the server's user."""
    server = launch_server(tmp_path, "--no-process-api", "--no-file-api", "--isolation", "off")
    try:
        with server.client() as api:
            started = api.post("/v1/desktop/start", json={"displayNum": 423, "width": 640, "height": 480})
            assert started.json().get("state") == "active", started.text
            for refused, flag in ((api.post("/v1/desktop/processes/run", json={"command": "id"}), "--no-process-api"),
                                  (api.get("/v1/desktop/fs/entries", params={"path": "~"}), "--no-file-api")):
                assert refused.status_code == 403 and refused.json()["code"] == "api_disabled", refused.text
                assert flag in refused.json()["detail"] and "not isolated" in refused.json()["detail"]
    finally:
        server.stop()


@pytest.mark.parametrize("flag", list(OPTIONAL_APIS))
def test_one_api_switched_off_leaves_the_other(tmp_path: Path, routes: list[tuple[str, str]], flag: str) -> None:
    (tmp_path / "home").mkdir()
    server = launch_server(tmp_path, flag, env={"HOME": str(tmp_path / "home")})
    try:
        assert_switched_off(server, routes, flag)
        with server.client() as api:
            (assert_fs_works if flag == "--no-process-api" else assert_processes_work)(api)
    finally:
        server.stop()


def test_without_the_flags_both_apis_work(plain: ServerProcess) -> None:
    with plain.client() as api:
        assert_fs_works(api)
        assert_processes_work(api)
        paths = api.get("/v1/openapi.json").json()["paths"]
    assert "/v1/processes/run" in paths and "/v1/fs/file" in paths
