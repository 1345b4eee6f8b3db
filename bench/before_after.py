"""A change to the request path, before and after: the same calls against a server of another checkout and of this one.

Starts a server of each checkout (`--before DIR`: a worktree of the code before, e.g. `git worktree add --detach
/tmp/before HEAD~1`; this checkout is the after), each with a 1280x800 desktop showing an xterm, and times, over one
kept-alive httpx connection and one command socket (`/v1/desktop/ws`, websockets' client, which offers
permessage-deflate) per server, the calls below, in alternating rounds (the order of the two servers flipped every
round, so load from elsewhere falls on both alike). Prints each call's median round trip and the server's CPU per
call (from /proc), before and after, and their ratio.
Usage: .venv/bin/python bench/before_after.py --before DIR [--requests 3000] [--rounds 10] [--calls NAME ...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
from websockets.sync.client import ClientConnection, connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import tests.conftest as harness
from bench.common import cpu_seconds, timed


@dataclass(frozen=True)
class Clients:
    http: httpx.Client
    socket: ClientConnection


def http(status: int, what: str) -> None:
    if status != 200:
        raise SystemExit(f"{what} -> {status}")


def over_socket(ws: ClientConnection, op: str, **message: object) -> None:
    """One message and its answer (and the binary frame after it, for an image)."""
    ws.send(json.dumps({"id": 1, "op": op, **message}))
    head = json.loads(ws.recv(30))
    if "binary" in head:
        ws.recv(30)
    http(head["status"], f"{op} over the socket")


def get(path: str) -> Callable[[Clients, int], None]:
    return lambda clients, i: http(clients.http.get(path).status_code, f"GET {path}")


CALLS: dict[str, Callable[[Clients, int], None]] = {
    "GET /v1/health": get("/v1/health"),
    "POST /v1/desktop/mouse/move": lambda clients, i: http(clients.http.post(
        "/v1/desktop/mouse/move", json={"x": 300 + 40 * (i % 2), "y": 300}).status_code, "move"),
    "GET /v1/desktop/mouse/position": get("/v1/desktop/mouse/position"),
    "GET /v1/desktop/status": get("/v1/desktop/status"),
    "WS mouse.move": lambda clients, i: over_socket(clients.socket, "mouse.move",
                                                    body={"x": 300 + 40 * (i % 2), "y": 300}),
    # On the desktop's background, bottom right: nothing of the xterm's.
    "WS mouse.click": lambda clients, i: over_socket(clients.socket, "mouse.click", body={"x": 1200, "y": 780}),
    "WS screenshot png": lambda clients, i: over_socket(clients.socket, "screenshot", query={"format": "png"}),
    "WS screenshot jpeg": lambda clients, i: over_socket(clients.socket, "screenshot", query={"format": "jpeg"}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the code before the change")
    parser.add_argument("--requests", type=int, default=3000, help="timings per call and server (default 3000)")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds (default 10)")
    parser.add_argument("--display-num", type=int, default=281, help="the first of the two desktops' displays")
    parser.add_argument("--calls", nargs="+", choices=list(CALLS), default=list(CALLS), metavar="NAME",
                        help=f"calls to time (default all: {', '.join(CALLS)})")
    args = parser.parse_args()
    calls = {name: CALLS[name] for name in args.calls}
    checkouts = {"before": args.before.resolve(), "after": harness.REPO}
    if not (checkouts["before"] / "api" / "cli" / "main.py").exists():
        raise SystemExit(f"{checkouts['before']} is not a checkout of this project")

    with contextlib.ExitStack() as stack:
        clients: dict[str, tuple[Clients, int]] = {}
        for offset, (name, checkout) in enumerate(checkouts.items()):
            harness.REPO = checkout  # launch_server runs `python -m api.cli.main` in REPO
            server = harness.launch_server(Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-ba-"))))
            stack.callback(server.stop)
            client = stack.enter_context(server.client())
            started = client.post("/v1/desktop/start", json={"displayNum": args.display_num + offset,
                                                             "width": 1280, "height": 800})
            if started.status_code != 200:
                raise SystemExit(f"{name}: the desktop did not start: {started.text}")
            client.post("/v1/desktop/launch", json={"app": "xterm", "wait": True})  # a screen with something on it
            socket = stack.enter_context(connect(server.url.replace("http://", "ws://") + "/v1/desktop/ws",
                                                 additional_headers={"Authorization": f"Bearer {server.token}"},
                                                 max_size=None))
            clients[name] = (Clients(client, socket), server.proc.pid)

        def run(name: str, call: str, count: int) -> float:
            """`count` timed calls to the server `name`; the server's CPU seconds they took."""
            client, pid = clients[name]
            send = calls[call]
            counter = iter(range(count))
            before = cpu_seconds(pid)
            samples[name, call] += timed(lambda: send(client, next(counter)), count)
            return cpu_seconds(pid) - before

        samples: dict[tuple[str, str], list[float]] = {(name, call): [] for name in clients for call in calls}
        cpu = dict.fromkeys(samples, 0.0)
        for name in clients:
            for call in calls:
                run(name, call, 100)  # warm each connection, path and desktop
        samples = {key: [] for key in samples}
        block = max(1, args.requests // args.rounds)
        for round_ in range(args.rounds):
            for name in (list(clients) if round_ % 2 == 0 else list(reversed(clients))):
                for call in calls:
                    cpu[name, call] += run(name, call, block)

        print(f"{'call':<32} {'before':>20} {'after':>20}  after/before")
        for call in calls:
            medians = {name: statistics.median(samples[name, call]) for name in clients}
            per_call = {name: cpu[name, call] / len(samples[name, call]) * 1e6 for name in clients}
            time_ratio, cpu_ratio = medians["after"] / medians["before"], per_call["after"] / per_call["before"]
            print(f"{call:<32} {medians['before'] * 1000:7.3f} ms {per_call['before']:5.0f} us "
                  f"{medians['after'] * 1000:7.3f} ms {per_call['after']:5.0f} us  "
                  f"{time_ratio:.2f}x time, {cpu_ratio:.2f}x CPU")


if __name__ == "__main__":
    main()
