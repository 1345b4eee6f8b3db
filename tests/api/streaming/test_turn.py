"""The live view through TURN (docs/streaming-turn.md): the server's own coturn (`--turn local`), a viewer that
may only relay, the credentials coturn checks, and the `iceservers` each viewer is handed.

coturn is real (`turnserver`, installed by scripts/setup.sh); without it these tests skip.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aioice import turn as aioice_turn
from aioice.stun import TransactionFailed
from aiortc.sdp import candidate_from_sdp

from api.cli.main import build_parser
from api.cli.turn_options import TURN_PASSWORD_ENV, TURN_SECRET_ENV, external_relays
from desktop.processes import ProcessManager
from streaming.coturn import LocalTurnOptions, LocalTurnServer, TurnServerUnavailable, coturn_config, stun_answers
from streaming.turn import (
    SharedSecret,
    StaticCredentials,
    TurnRelays,
    ice_servers_json,
    rest_credential,
    rest_username,
)
from streaming.viewer import Viewer
from tests.api.streaming.test_nat import HTTP_PORT, PRIVATE, PUBLIC, PortForward
from tests.conftest import REPO, ServerProcess, free_port, launch_server, poll, run

needs_coturn = pytest.mark.skipif(shutil.which("turnserver") is None,
                                  reason="coturn is not installed (scripts/setup.sh test installs it)")
DESKTOP = {"width": 320, "height": 240, "webrtcPortRange": "59481-59489"}
RELAY_PORTS = "59490-59499"


def free_udp_port() -> int:
    """A port free for both UDP and TCP (coturn listens on both)."""
    import socket
    for _ in range(50):
        port = free_port()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port")


def candidate_types(sdp: str) -> set[str]:
    return {candidate_from_sdp(line[len("a=candidate:"):]).type for line in sdp.splitlines()
            if line.startswith("a=candidate:")}


def configured_secret(config: Path) -> str:
    """The shared secret of the coturn configuration `--turn local` wrote."""
    return next(line.split("=", 1)[1] for line in config.read_text().splitlines()
                if line.startswith("static-auth-secret="))


async def allocate(port: int, username: str, password: str) -> str | None:
    """A TURN Allocate on 127.0.0.1:`port` with these credentials: the relayed address, or None if refused."""
    try:
        transport, _ = await asyncio.wait_for(aioice_turn.create_turn_endpoint(
            asyncio.DatagramProtocol, server_addr=("127.0.0.1", port), username=username, password=password), 10)
    except TransactionFailed as exc:
        assert exc.response.attributes["ERROR-CODE"][0] == 401, exc.response
        return None
    try:
        host, relayed = transport.get_extra_info("sockname")[:2]
        return f"{host}:{relayed}"
    finally:
        transport.close()


# -- credentials ---------------------------------------------------------------------------------------------

def test_viewer_credentials_follow_the_turn_rest_scheme_and_a_static_account_is_handed_out_as_is() -> None:
    relays = TurnRelays(("turn:turn.example:3478?transport=udp", "turns:turn.example:5349"),
                        SharedSecret("s3cret", ttl=600))
    (server,) = relays.ice_servers("default/Ann Lee", now=1_700_000_000)
    assert server.username == "1700000600:default/Ann_Lee"  # expiry first; a space is no TURN username char
    assert server.credential == "7vwV7mUnvOY5lS4iQXpM+cVQwhY="  # base64(HMAC-SHA1("s3cret", username))
    assert server.credential == rest_credential("s3cret", server.username)
    assert ice_servers_json([server]) == [{"urls": ["turn:turn.example:3478?transport=udp", "turns:turn.example:5349"],
                                           "username": "1700000600:default/Ann_Lee",
                                           "credential": "7vwV7mUnvOY5lS4iQXpM+cVQwhY="}]
    assert relays.for_server_peer("default") == []  # the server's own peer relays only when asked
    fixed = TurnRelays(("turn:10.0.0.5",), StaticCredentials("desk", "pw"), server_relay=True)
    assert [s.to_json() for s in fixed.for_viewer("d1", "v")] == [{"urls": ["turn:10.0.0.5"], "username": "desk",
                                                                     "credential": "pw"}]
    assert fixed.for_server_peer("d1")[0].username == "desk"
    for bad in ("stun:turn.example", "turn:", "turn:host:99999", "turns:host?transport=udp", "turn:a b"):
        with pytest.raises(ValueError):
            TurnRelays((bad,), fixed.credentials)


@needs_coturn
def test_coturn_grants_a_fresh_credential_and_refuses_an_expired_or_forged_one(tmp_path: Path) -> None:
    port = free_udp_port()

    async def scenario() -> tuple[list[str | None], list[str], str, str | None]:
        processes = ProcessManager()
        server = LocalTurnServer(LocalTurnOptions(port=port, relay_ports=(59490, 59499)), processes, tmp_path / "turn")
        await server.start()
        try:
            (offered,) = server.relays().ice_servers("default/probe")
            now = int(time.time())
            expired = rest_username("default/probe", now - 5)
            results = [await allocate(port, offered.username, offered.credential),
                       await allocate(port, expired, rest_credential(configured_secret(server.config_path), expired)),
                       await allocate(port, offered.username, rest_credential("not the secret", offered.username))]
            granted = server.allocations()
            # A second coturn would share the port (SO_REUSEPORT) and half the viewers: refused before it starts.
            with pytest.raises(TurnServerUnavailable, match="is taken"):
                await LocalTurnServer(LocalTurnOptions(port=port), processes, tmp_path / "second").start()
            # Supervised: killed, coturn is started again with the same secret.
            first = turnserver_pids()
            for pid, line in first.items():
                if str(server.config_path) in line:
                    os.kill(pid, signal.SIGKILL)
            await poll(lambda: server.restarts == 1 and server.running, "coturn started again")
            again = await allocate(port, offered.username, offered.credential)  # retransmitted until it listens
            return results, granted, offered.username, again
        finally:
            await server.stop()
            await processes.shutdown()

    (fresh, expired, forged), granted, username, again = run(scenario, timeout=60)
    assert fresh is not None and fresh.startswith("127.0.0.1:"), fresh
    assert 59490 <= int(fresh.rsplit(":", 1)[1]) <= 59499  # a relay port of the configured range
    assert expired is None and forged is None
    assert granted == [username]  # coturn's own log: one allocation, the fresh one
    assert again is not None
    config = tmp_path / "turn" / "turnserver.conf"
    assert config.stat().st_mode & 0o777 == 0o600
    assert not any(str(config) in line for line in turnserver_pids().values())  # stopped


# -- the server ------------------------------------------------------------------------------------------------

def watch(server: ServerProcess, display: int, relay_only: bool) -> Viewer:
    """Start a desktop and its stream, connect a viewer and wait for a few decoded frames."""
    with server.client() as api:
        started = api.post("/v1/desktop/start", json={"displayNum": display, **DESKTOP})
        assert started.json()["state"] == "active", started.text
        assert api.post("/v1/desktop/stream/start").json()["active"]

    async def scenario() -> Viewer:
        viewer = Viewer(server.url, server.token, relay_only=relay_only, name="Ann")
        try:
            await viewer.connect(timeout=30)
            await viewer.wait_frames(3, timeout=30)
        finally:
            await viewer.close()
        return viewer
    return run(scenario, timeout=120)


def turnserver_pids() -> dict[int, str]:
    """Running turnserver processes and their command lines."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if line.startswith("turnserver"):
                found[int(entry.name)] = line
    return found


@needs_coturn
@pytest.mark.parametrize("server_relay", [False, True], ids=["viewer-relays", "both-relay"])
def test_a_relay_only_viewer_gets_video_through_the_servers_own_coturn(tmp_path: Path, server_relay: bool) -> None:
    port = free_udp_port()
    before = set(turnserver_pids())
    server = launch_server(tmp_path, "--turn", "local", "--turn-listen", f"127.0.0.1:{port}",
                           "--turn-relay-ports", RELAY_PORTS, "--turn-ttl", "120",
                           *(["--turn-server-relay"] if server_relay else []))
    try:
        ours = {pid: line for pid, line in turnserver_pids().items() if pid not in before}
        started = time.time()
        viewer = watch(server, 485 + server_relay, relay_only=True)
    finally:
        server.stop()
    (provide,) = viewer.events_named("signal/provide")
    (offered,) = provide["iceservers"]
    assert offered["urls"] == [f"turn:127.0.0.1:{port}?transport=udp", f"turn:127.0.0.1:{port}?transport=tcp"]
    expiry, who = offered["username"].split(":", 1)
    assert who == "default/Ann" and started + 120 - 5 <= int(expiry) <= time.time() + 120 + 5
    turn_dir = server.state_dir / "turn"
    secret = configured_secret(turn_dir / "turnserver.conf")
    assert offered["credential"] == rest_credential(secret, offered["username"])
    # The viewer offered only relayed candidates, got frames, and coturn granted its allocation.
    assert candidate_types(viewer.answer_sdp or "") == {"relay"}, viewer.answer_sdp
    assert viewer.received.frames >= 3
    log = (turn_dir / "turnserver.log").read_text()
    assert f"user <{offered['username']}>: incoming packet ALLOCATE processed, success" in log, log[-3000:]
    # With --turn-server-relay the server's peer offers a relayed candidate of its own, allocated as the desktop.
    assert ("relay" in candidate_types(viewer.offer_sdp or "")) is server_relay, viewer.offer_sdp
    assert (":default+server>: incoming packet ALLOCATE processed, success" in log) is server_relay, log[-3000:]
    # coturn ran from its file (the secret never on its command line) and stopped with the server.
    assert len(ours) == 1 and secret not in next(iter(ours.values())), ours
    assert not set(ours) & set(turnserver_pids())


@needs_coturn
def test_turn_servers_run_elsewhere_take_the_secret_from_the_environment(tmp_path: Path) -> None:
    # "Elsewhere": a coturn the test runs from the configuration --turn local would write, with a secret it knows.
    port, secret, state = free_udp_port(), "shared-" + os.urandom(8).hex(), tmp_path / "coturn"
    state.mkdir()
    options = LocalTurnOptions(port=port, relay_ports=(59490, 59499))
    (state / "turnserver.conf").write_text(coturn_config(options, secret, state, ("127.0.0.1",)))
    with open(state / "log", "wb") as log:
        coturn = subprocess.Popen(["turnserver", "-c", str(state / "turnserver.conf")], stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        for _ in range(100):
            if stun_answers(("127.0.0.1", port)):
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"coturn did not start: {(state / 'log').read_text()}")
        server = launch_server(tmp_path, "--turn-url", f"turn:127.0.0.1:{port}?transport=udp",
                               env={TURN_SECRET_ENV: secret})
        try:
            with server.client() as api:  # what a desktop's programs see: the secret is not in their environment
                listed = api.post("/v1/processes/run", json={"command": "env"}).json()["stdout"]
            viewer = watch(server, 488, relay_only=True)
        finally:
            server.stop()
    finally:
        coturn.terminate()
        coturn.wait(10)
    assert "PATH=" in listed  # it did list an environment
    assert TURN_SECRET_ENV not in listed and secret not in listed
    (offered,) = viewer.events_named("signal/provide")[0]["iceservers"]
    assert offered["urls"] == [f"turn:127.0.0.1:{port}?transport=udp"]
    assert offered["credential"] == rest_credential(secret, offered["username"])
    assert candidate_types(viewer.answer_sdp or "") == {"relay"} and viewer.received.frames >= 3


@needs_coturn
def test_a_viewer_outside_a_nat_that_forwards_only_the_turn_port_gets_video(tmp_path: Path) -> None:
    # The router forwards the HTTP port and coturn's 3478 (UDP and TCP) to the server, not its media ports: the
    # viewer has no route inside, so its video can only come through the relay coturn allocated for it.
    turn_port = "3478"
    forwards = (("tcp", str(HTTP_PORT)), ("tcp", turn_port), ("udp", turn_port))
    with PortForward.create(forwards) as nat:
        unreachable = subprocess.run(["ip", "-n", nat.viewer, "route", "get", PRIVATE], capture_output=True)
        assert unreachable.returncode != 0  # the viewer cannot route to the server itself
        with nat.server_process(tmp_path, "--turn", "local", "--turn-listen", f"{PRIVATE}:{turn_port}",
                                "--turn-public-host", PUBLIC) as server:
            watched = nat.watch(server, 487, 30)
            log = (server.state_dir / "turn" / "turnserver.log").read_text()
        assert watched.returncode == 0, watched.stderr + server.log()
        result = json.loads(watched.stdout.strip().splitlines()[-1])
        assert result["frames"] >= 1 and (result["width"], result["height"]) == (320, 240), result
        assert "/viewer_1>: incoming packet ALLOCATE processed, success" in log, log[-3000:]
        assert nat.forwarded_udp_packets() > 0  # the relay's packets came through the router's forwarded 3478


def test_without_turn_viewers_get_no_ice_servers(tmp_path: Path) -> None:
    server = launch_server(tmp_path)
    try:
        viewer = watch(server, 484, relay_only=False)
    finally:
        server.stop()
    assert [p["iceservers"] for p in viewer.events_named("signal/provide")] == [[]]  # as before: the SDK's path


def test_turn_options_become_the_relays_viewers_are_handed(monkeypatch: pytest.MonkeyPatch) -> None:
    def relays(*flags: str) -> TurnRelays | None:
        return external_relays(build_parser(["server", *flags]).parse_args(["server", *flags]))

    urls = ("--turn-url", "turn:turn.example:3478?transport=udp", "--turn-url", "turns:turn.example")
    monkeypatch.setenv(TURN_SECRET_ENV, "from-env")
    assert relays(*urls, "--turn-ttl", "90") == TurnRelays(
        ("turn:turn.example:3478?transport=udp", "turns:turn.example"), SharedSecret("from-env", 90))
    assert relays(*urls, "--turn-secret", "given").credentials == SharedSecret("given", 3600)  # the option wins
    monkeypatch.setenv(TURN_PASSWORD_ENV, "pw")
    fixed = relays(*urls, "--turn-username", "desk", "--turn-server-relay")
    assert fixed is not None and fixed.credentials == StaticCredentials("desk", "pw") and fixed.server_relay
    assert relays() is None


def server_refuses(*flags: str, env: dict[str, str] | None = None) -> str:
    """Start the server with `flags`; it must exit 2 before serving. Returns what it printed."""
    done = subprocess.run([sys.executable, "-m", "api.cli.main", "server", "--port", "0", "--no-token", *flags],
                          cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**{k: v for k, v in os.environ.items() if k != TURN_SECRET_ENV}, **(env or {})})
    assert done.returncode == 2, done.stdout + done.stderr
    return done.stderr


def test_turn_options_that_cannot_work_stop_the_server_with_the_fix(tmp_path: Path) -> None:
    assert "--turn-secret" in server_refuses("--turn-url", "turn:127.0.0.1:3478")
    assert "turn:HOST[:PORT]" in server_refuses("--turn-url", "stun:127.0.0.1", "--turn-secret", "x")
    assert "--turn local" in server_refuses("--turn-relay-ports", "50000-50010")
    assert "exclude each other" in server_refuses("--turn", "local", "--turn-url", "turn:h")
    empty = tmp_path / "bin"
    empty.mkdir()
    missing = server_refuses("--turn", "local", env={"PATH": str(empty)})
    assert "sandbox-desktop install desktop --yes --with-turn" in missing and "coturn" in missing, missing
