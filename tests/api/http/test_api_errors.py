"""Every bad-input class answers problem+json naming the field; auth, CORS and the API document."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable

import httpx
import pytest

from tests.conftest import ServerProcess, assert_problem


def test_root_and_health_are_open_without_token(server: ServerProcess) -> None:
    health = httpx.get(server.url + "/v1/health")
    assert health.json() == {"status": "ok"}
    assert "server" not in health.headers and "date" in health.headers  # no software named; the date HTTP asks
    root = httpx.get(server.url + "/")
    assert root.status_code == 200 and root.json()["name"] == "Sandbox Agent"


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "bearer x"},
                                     {"Authorization": "Basic abc"}])
def test_missing_or_wrong_token_is_401_problem(server: ServerProcess, headers: dict[str, str]) -> None:
    response = httpx.get(server.url + "/v1/desktop/status", headers=headers)
    problem = assert_problem(response, 401, "token_invalid")
    assert problem["type"] == "urn:sandbox-agent:error:token_invalid"
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_token_protects_unknown_v1_routes_and_the_api_document(server: ServerProcess) -> None:
    assert_problem(httpx.get(server.url + "/v1/nope"), 401, "token_invalid")
    assert_problem(httpx.get(server.url + "/v1/openapi.json"), 401, "token_invalid")


def test_query_access_token_is_not_accepted_on_plain_http(server: ServerProcess) -> None:
    response = httpx.get(server.url + "/v1/desktop/status", params={"access_token": server.token})
    assert_problem(response, 401, "token_invalid")


def test_malformed_json_is_400(client: httpx.Client) -> None:
    response = client.post("/v1/desktop/start", content=b'{"width": ', headers={"Content-Type": "application/json"})
    problem = assert_problem(response, 400, "invalid_request")
    assert "malformed JSON" in problem["detail"]  # type: ignore[operator]


def test_wrong_content_type_is_415(client: httpx.Client) -> None:
    response = client.post("/v1/desktop/start", content=b'{"width": 800}', headers={"Content-Type": "text/plain"})
    problem = assert_problem(response, 415, "unsupported_media_type")
    assert "application/json" in problem["detail"]  # type: ignore[operator]


def test_wrong_type_is_422_naming_the_field(client: httpx.Client) -> None:
    problem = assert_problem(client.post("/v1/desktop/start", json={"width": "800"}), 422, "invalid_request")
    assert [e["field"] for e in problem["errors"]] == ["width"]  # type: ignore[union-attr]


def test_float_for_integer_and_bool_for_integer_are_rejected(client: httpx.Client) -> None:
    assert_problem(client.post("/v1/desktop/start", json={"width": 800.5}), 422)
    assert_problem(client.post("/v1/desktop/start", json={"height": True}), 422)


def test_each_bad_field_is_listed(client: httpx.Client) -> None:
    problem = assert_problem(client.post("/v1/desktop/start", json={"width": "a", "dpi": [], "displayNum": {}}), 422)
    assert sorted(e["field"] for e in problem["errors"]) == ["displayNum", "dpi", "width"]  # type: ignore[union-attr]


def test_missing_required_field_is_422(client: httpx.Client) -> None:
    problem = assert_problem(client.post("/v1/processes/run", json={"args": ["x"]}), 422, "invalid_request")
    assert problem["errors"][0]["field"] == "command"  # type: ignore[index]
    assert problem["errors"][0]["message"] == "field required"  # type: ignore[index]


def test_non_object_body_is_422(client: httpx.Client) -> None:
    assert_problem(client.post("/v1/desktop/start", json=[1, 2]), 422)
    assert_problem(client.post("/v1/desktop/start", json="text"), 422)


def test_empty_body_on_an_all_optional_endpoint_reads_as_empty_object(client: httpx.Client) -> None:
    response = client.post("/v1/desktop/start", json={"width": -1})
    assert_problem(response, 400, "desktop_invalid_action")
    # An empty body is `{}` rather than the reference's 415 (the SDK always sends one).
    assert client.post("/v1/desktop/stop").status_code == 200


def test_unknown_fields_and_nulls_are_accepted(client: httpx.Client) -> None:
    response = client.post("/v1/desktop/start", json={"width": None, "bogus": 1, "dpi": 0})
    problem = assert_problem(response, 400, "desktop_invalid_action")
    assert problem["errors"][0]["field"] == "dpi"  # type: ignore[index]


def test_bad_query_parameter_is_400_naming_it(client: httpx.Client) -> None:
    problem = assert_problem(client.get("/v1/processes", params={"owner": "bogus"}), 400)
    assert problem["errors"][0]["field"] == "owner"  # type: ignore[index]
    assert problem["errors"][0]["location"] == "query"  # type: ignore[index]


def test_unknown_routes_are_404_problem(client: httpx.Client, server: ServerProcess) -> None:
    for path in ("/v1/does-not-exist", "/v1/desktop/nope", "/v2/anything"):
        problem = assert_problem(client.get(path), 404, "not_found")
        assert problem["detail"] == "endpoint not found"
    assert_problem(httpx.get(server.url + "/elsewhere"), 404)


def test_wrong_method_is_405_with_allow(client: httpx.Client) -> None:
    response = client.delete("/v1/desktop/status")
    problem = assert_problem(response, 405, "method_not_allowed")
    assert "GET" in response.headers["allow"]
    assert "DELETE" in problem["detail"]  # type: ignore[operator]
    post_only = client.get("/v1/desktop/start")
    assert_problem(post_only, 405)
    assert post_only.headers["allow"] == "POST"


def test_oversized_json_body_is_413(client: httpx.Client) -> None:
    huge = b'{"command": "' + b"a" * (65 * 1024 * 1024) + b'"}'
    response = client.post("/v1/processes/run", content=huge, headers={"Content-Type": "application/json"})
    assert_problem(response, 413, "payload_too_large")


def test_openapi_document_describes_every_route(client: httpx.Client) -> None:
    doc = client.get("/v1/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    paths = doc["paths"]
    for path, method in [("/v1/desktop/start", "post"), ("/v1/desktop/status", "get"), ("/v1/processes", "get"),
                         ("/v1/processes/{id}/logs", "get"), ("/v1/fs/file", "put"), ("/v1/health", "get")]:
        assert method in paths[path], path
    start = paths["/v1/desktop/start"]["post"]
    schema_ref = start["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = doc["components"]["schemas"][schema_ref.rsplit("/", 1)[1]]
    assert {"width", "height", "dpi", "displayNum", "stateDir", "recordingFps"} <= set(schema["properties"])
    assert "401" in start["responses"] and "422" in start["responses"]
    status = paths["/v1/desktop/status"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    status_schema = doc["components"]["schemas"][status["$ref"].rsplit("/", 1)[1]]
    assert {"state", "missingDependencies", "processes", "runtimeLogPath"} <= set(status_schema["required"])
    json.dumps(doc)  # serialisable, no stray objects


def test_cors_preflight_and_simple_requests(server_factory: Callable[..., ServerProcess]) -> None:
    srv = server_factory("-O", "http://app.example", "--no-token", token=None)
    preflight = httpx.options(srv.url + "/v1/desktop/status", headers={
        "Origin": "http://app.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "http://app.example"
    assert "vary" in preflight.headers
    simple = httpx.get(srv.url + "/v1/health", headers={"Origin": "http://app.example"})
    assert simple.headers["access-control-allow-origin"] == "http://app.example"
    refused = httpx.options(srv.url + "/v1/health", headers={
        "Origin": "http://evil.example", "Access-Control-Request-Method": "GET"})
    assert_problem(refused, 403, "origin_not_allowed")  # a page we do not serve gets no preflight either
    assert "access-control-allow-origin" not in refused.headers


def test_cors_without_origins_refuses_every_origin(server: ServerProcess) -> None:
    preflight = httpx.options(server.url + "/v1/health", headers={
        "Origin": "http://app.example", "Access-Control-Request-Method": "GET"})
    assert_problem(preflight, 403, "origin_not_allowed")
    assert "access-control-allow-origin" not in preflight.headers


def test_cors_credentials_with_default_wildcards_starts_and_echoes(
        server_factory: Callable[..., ServerProcess]) -> None:
    srv = server_factory("-O", "http://app.example", "-C", "--no-token", token=None)
    preflight = httpx.options(srv.url + "/v1/desktop/status", headers={
        "Origin": "http://app.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization"})
    assert preflight.headers["access-control-allow-credentials"] == "true"
    assert preflight.headers["access-control-allow-headers"] == "authorization"
    assert preflight.headers["access-control-allow-methods"] == "POST"


def test_token_from_environment(server_factory: Callable[..., ServerProcess]) -> None:
    srv = server_factory("--no-token", token=None, env={"SANDBOX_DESKTOP_TOKEN_X": "unused"})
    assert httpx.get(srv.url + "/v1/desktop/status").status_code == 200  # no token configured
    env_srv = server_factory(token=None, env={"SANDBOX_DESKTOP_TOKEN": "from-env"})
    assert httpx.get(env_srv.url + "/v1/desktop/status").status_code == 401
    ok = httpx.get(env_srv.url + "/v1/desktop/status", headers={"Authorization": "Bearer from-env"})
    assert ok.status_code == 200


# Found by fuzzing: "²" passes str.isdigit() but int() refuses it, and "١٠٢٥" would read as 1025.
NON_ASCII_DIGITS = ["²-³", "١٠٢٥-٢٠٠٠", "5905\uff10-59070"]  # the last: a fullwidth zero


@pytest.mark.parametrize("ports", NON_ASCII_DIGITS)
def test_non_ascii_digits_in_a_port_range_are_400_naming_it(client: httpx.Client, ports: str) -> None:
    problem = assert_problem(client.post("/v1/desktop/start", json={"webrtcPortRange": ports}), 400,
                             "desktop_invalid_action")
    assert problem["errors"][0]["field"] == "webrtcPortRange"  # type: ignore[index]
    assert client.get("/v1/health").status_code == 200  # and the connection is still good


def test_non_ascii_digits_in_headers_are_400_or_ignored(client: httpx.Client) -> None:
    proc = client.post("/v1/processes", json={"command": "true"}).json()
    logs = client.get(f"/v1/processes/{proc['id']}/logs", params={"follow": "true"},
                      headers={"Last-Event-ID": "²".encode("latin-1")})
    assert_problem(logs, 400)
    assert "Last-Event-ID" in logs.text
    from api.routes.recording import byte_range

    assert byte_range("bytes=²-", 100) is None and byte_range("bytes=-²", 100) is None
    assert byte_range("bytes=10-²", 100) is None and byte_range("bytes=10-20", 100) == (10, 20)


@pytest.mark.parametrize("framing", [b"Content-Length: abc\r\n", b"a header line without a colon\r\n"])
def test_a_request_the_http_parser_refuses_is_a_400_problem(server: ServerProcess, framing: bytes) -> None:
    """Refused before any app sees it (api/cli/parser_refusals.py), and still a problem document."""
    host, port = server.url.removeprefix("http://").rstrip("/").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: " + host.encode() + b"\r\n" + framing + b"\r\n")
        answer = b""
        while chunk := sock.recv(65536):  # the server closes the connection after it
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0] == "HTTP/1.1 400 Bad Request", answer
    assert "content-type: application/problem+json" in [line.lower() for line in lines[1:]], answer
    problem = json.loads(body)
    assert (problem["status"], problem["code"], problem["errors"][0]["field"]) == (400, "invalid_request", "request")
    assert "not valid HTTP/1.1" in problem["detail"]


def test_an_idle_kept_alive_connection_outlives_the_clients_own_expiry(server: ServerProcess) -> None:
    """httpx lets an idle connection go after 5 s; the server keeps it longer (api/cli/main.py, KEEP_ALIVE_S), so a
    request sent on it at about 5 s is never met by the server's close."""
    host, port = server.url.removeprefix("http://").rstrip("/").rsplit(":", 1)
    request = f"GET /v1/health HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        for pause in (0, 6):
            time.sleep(pause)
            sock.sendall(request)
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 OK"), f"no answer after {pause} s idle"
