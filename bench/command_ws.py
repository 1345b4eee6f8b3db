"""Benchmark the command WebSocket against HTTP keep-alive on one desktop: a no-op, a mouse move and a click.

Starts a server (with a token, as it runs by default) and a desktop, then times each call one at a time, in
alternating blocks so load from elsewhere falls on both alike:
- HTTP: one httpx client holding one kept-alive connection (`GET /v1/health`, `POST /v1/desktop/mouse/move`,
  `POST /v1/desktop/mouse/click`);
- WebSocket: one `/v1/desktop/ws` connection (websockets' sync client), each op sent and its answer awaited
  (`server.health`, `mouse.move`, `mouse.click`);
- the Python client, `Client(url)` against `Client(url, transport="websocket")` (`health()`, `move`, `click`);
with the server's and the client's CPU time per call beside each median; then, pipelined, how long a batch of
moves takes per move when sent without waiting for each answer.
Usage: .venv/bin/python bench/command_ws.py [--requests 2000] [--rounds 10]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import cpu_seconds, summary, timed
from sandbox_desktop_client import Client
from tests.conftest import launch_server

Call = Callable[[], object]


def alternating(calls: dict[str, Call], count: int, rounds: int,
                server_pid: int) -> dict[str, tuple[list[float], float, float]]:
    """`count` timings of each call, taken in `rounds` alternating blocks (after a warm-up of each), with the CPU
    seconds per call the server and this process (the client, its threads included) spent on them: under load
    from elsewhere the wall clock wanders, the CPU each side spends much less."""
    for call in calls.values():
        timed(call, 50)
    samples: dict[str, list[float]] = {name: [] for name in calls}
    server_cpu = dict.fromkeys(calls, 0.0)
    client_cpu = dict.fromkeys(calls, 0.0)
    block = max(1, count // rounds)
    for _ in range(rounds):
        for name, call in calls.items():
            server_before, client_before = cpu_seconds(server_pid), cpu_seconds()
            samples[name] += timed(call, block)
            server_cpu[name] += cpu_seconds(server_pid) - server_before
            client_cpu[name] += cpu_seconds() - client_before
    done = block * rounds
    return {name: (samples[name], server_cpu[name] / done, client_cpu[name] / done) for name in calls}


def http_call(client: httpx.Client, method: str, path: str, body: Any = None) -> Call:
    def call() -> None:
        response = client.request(method, path, json=body)
        if response.status_code != 200:
            raise SystemExit(f"{method} {path} -> {response.status_code}: {response.text}")
    return call


def ws_call(ws: ClientConnection, op: str, body: Any = None) -> Call:
    text = json.dumps({"id": 1, "op": op, **({"body": body} if body is not None else {})})

    def call() -> None:
        ws.send(text)
        answer = json.loads(ws.recv())
        if answer["status"] != 200:
            raise SystemExit(f"{op} -> {answer}")
    return call


def pipelined(ws: ClientConnection, batch: int) -> float:
    """Seconds per move when `batch` moves are sent before any answer is read."""
    messages = [json.dumps({"id": i, "op": "mouse.move", "body": {"x": 100 + i % 500, "y": 200}})
                for i in range(batch)]
    start = time.perf_counter()
    for text in messages:
        ws.send(text)
    for _ in messages:
        ws.recv()
    return (time.perf_counter() - start) / batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000, help="timings per figure (default 2000)")
    parser.add_argument("--rounds", type=int, default=10, help="alternating blocks (default 10)")
    parser.add_argument("--display-num", type=int, default=547)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-command-ws-"))
    server = launch_server(tmp)
    headers = {"Authorization": f"Bearer {server.token}"}
    try:
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http, \
                connect(server.url.replace("http://", "ws://") + "/v1/desktop/ws", additional_headers=headers,
                        compression=None) as ws, \
                Client(server.url, token=server.token) as over_http, \
                Client(server.url, token=server.token, transport="websocket") as over_ws:
            started = http.post("/v1/desktop/start", json={"displayNum": args.display_num, "width": 1280,
                                                            "height": 800})
            if started.status_code != 200:
                raise SystemExit(f"desktop start failed: {started.text}")
            move, click = {"x": 640, "y": 400}, {"x": 1270, "y": 790}
            pairs: list[dict[str, Call]] = [
                {"HTTP    GET /v1/health": http_call(http, "GET", "/v1/health"),
                 "WS      server.health": ws_call(ws, "server.health")},
                {"HTTP    POST /v1/desktop/mouse/move": http_call(http, "POST", "/v1/desktop/mouse/move", move),
                 "WS      mouse.move": ws_call(ws, "mouse.move", move)},
                {"HTTP    POST /v1/desktop/mouse/click": http_call(http, "POST", "/v1/desktop/mouse/click", click),
                 "WS      mouse.click": ws_call(ws, "mouse.click", click)},
                {"Client()                     .move": lambda: over_http.move(640, 400),
                 "Client(transport=\"websocket\").move": lambda: over_ws.move(640, 400)},
                {"Client()                     .click": lambda: over_http.click(1270, 790),
                 "Client(transport=\"websocket\").click": lambda: over_ws.click(1270, 790)},
            ]
            for pair in pairs:
                found = alternating(pair, args.requests, args.rounds, server.proc.pid)
                (http_name, (http_samples, *http_cpu)), (ws_name, (ws_samples, *ws_cpu)) = found.items()
                http_median = summary(http_name, http_samples)
                summary(ws_name, ws_samples, http_median, "HTTP")
                for side, http_s, ws_s in zip(("server", "client"), http_cpu, ws_cpu, strict=True):
                    print(f"    CPU per call, {side}: HTTP {http_s * 1e6:5.0f} us, WS {ws_s * 1e6:5.0f} us "
                          f"({ws_s / http_s:.2f}x)")
                print()
            per_move = statistics.median(pipelined(ws, 200) for _ in range(10))
            print(f"{'WS      mouse.move, 200 pipelined':<52} {per_move * 1000:8.3f} ms per move")
            http.post("/v1/desktop/stop")
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
