"""`sandbox-desktop server --desktop-policy FILE`: every desktop created on the server gets its tags, capped
timers, network rules and capped limits, whoever asks; more than it allows is a 403 naming the field, at
creation and in a PATCH; the default desktop gets its network rules and limits too."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO, ServerProcess, launch_server

POLICY = {"tags": {"tenant": "acme"}, "maxTtlSeconds": 3600, "maxAutoPauseSeconds": 600,
          "network": {"egress": "none"}, "limits": {"memoryMb": 1024, "pids": 256}}
SIZE = {"width": 320, "height": 240}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("policy")
    (tmp / "policy.json").write_text(json.dumps(POLICY))
    server = launch_server(tmp, "--desktop-policy", str(tmp / "policy.json"))
    yield server
    server.stop()


@pytest.fixture
def api(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client(timeout=60) as client:
        yield client


def refused(answer: httpx.Response, field: str) -> None:
    assert answer.status_code == 403 and answer.json()["code"] == "policy_refused", answer.text
    assert answer.json()["errors"][0]["field"] == field, answer.text


def test_a_desktop_asked_for_nothing_gets_what_the_policy_imposes(api: httpx.Client) -> None:
    made = api.post("/v1/desktops", json={**SIZE, "tags": {"task": "t1"}})
    assert made.status_code == 201, made.text
    desktop = made.json()
    try:
        assert desktop["tags"] == {"task": "t1", "tenant": "acme"}
        assert desktop["autoPauseSeconds"] == 600 and desktop["expiresAt"]
        assert desktop["network"]["egress"] == "none"
        assert (desktop["limits"]["memoryMb"], desktop["limits"]["pids"]) == (1024, 256)
        # In force on its namespace, not only on its record (tests/api/sandbox checks what each mode reaches).
        applied = api.get(f"/v1/desktops/{desktop['id']}/network").json()
        assert applied["rules"]["egress"] == "none", applied
    finally:
        api.delete(f"/v1/desktops/{desktop['id']}")


def test_more_than_the_policy_allows_is_refused_naming_the_field(api: httpx.Client) -> None:
    before = len(api.get("/v1/desktops").json()["desktops"])
    refused(api.post("/v1/desktops", json={**SIZE, "tags": {"tenant": "evil"}}), "tags.tenant")
    refused(api.post("/v1/desktops", json={**SIZE, "ttlSeconds": 3601}), "ttlSeconds")
    refused(api.post("/v1/desktops", json={**SIZE, "network": {"egress": "all"}}), "network")
    refused(api.post("/v1/desktops", json={**SIZE, "limits": {"pids": 1000}}), "limits.pids")
    assert len(api.get("/v1/desktops").json()["desktops"]) == before, "a refused create made no desktop"


def test_a_patch_is_held_to_the_policy(api: httpx.Client) -> None:
    made = api.post("/v1/desktops", json={**SIZE, "autoPauseSeconds": 60, "limits": {"pids": 128}}).json()
    one = f"/v1/desktops/{made['id']}"
    try:
        assert made["autoPauseSeconds"] == 60 and made["limits"]["pids"] == 128
        refused(api.patch(one, json={"autoPauseSeconds": 601}), "autoPauseSeconds")
        refused(api.patch(one, json={"network": {"egress": "all"}}), "network")
        refused(api.patch(one, json={"limits": {"memoryMb": 2048}}), "limits.memoryMb")
        refused(api.patch(one, json={"tags": {"tenant": "evil"}}), "tags.tenant")
        changed = api.patch(one, json={"tags": {"task": "t2"}, "autoPauseSeconds": None, "ttlSeconds": 120})
        assert changed.status_code == 200, changed.text
        # The tags are replaced whole with the policy's kept; a timer cleared goes back to its cap.
        assert changed.json()["tags"] == {"task": "t2", "tenant": "acme"}
        assert changed.json()["autoPauseSeconds"] == 600 and changed.json()["limits"]["pids"] == 128
    finally:
        api.delete(one)


def test_the_default_desktop_gets_the_policys_network_and_limits(api: httpx.Client) -> None:
    default = api.get("/v1/desktops/default").json()
    assert default["network"]["egress"] == "none" and default["limits"]["pids"] == 256
    assert default["tags"] == {}, "the default desktop has no tags to impose on"


def test_a_policy_file_with_a_mistake_stops_the_server_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "policy.json").write_text(json.dumps({"maxTTLSeconds": 60}))
    started = subprocess.run([sys.executable, "-m", "api.cli.main", "server", "--desktop-policy",
                              str(tmp_path / "policy.json")], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert started.returncode == 2 and "unknown key 'maxTTLSeconds'" in started.stderr, started.stderr
