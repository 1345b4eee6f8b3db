"""Where the HTTP floor goes: one request answered by the layers under our server, each on its own, beside ours.

The same kept-alive `GET /v1/health` from one httpx client, in alternating rounds, to five servers on this machine:

- `asyncio`: an asyncio protocol that answers each request's bytes with a constant response, parsing nothing: the
  floor of Python's event loop and the kernel's loopback;
- `httptools + task`: the request parsed by httptools and answered from a task of its own, as any ASGI server on
  asyncio must do at the least;
- `uvicorn, bare app`: uvicorn as it comes, with httptools, running an ASGI app that answers the constant;
- `our uvicorn, bare app`: the same app served as this server serves its own (api/cli/main.py
  `uvicorn_config`: its settings and its patches of uvicorn);
- `ours`: this server's `GET /v1/health`, token checked, at `--log-level warning` (as every bench runs it), and
  `ours, access log`: the same at the default `info`, one access line per request;
- `reference`: the reference server (Rust), from tests/sdk/node_modules, when it is there;
- with `--granian DIR` (granian installed there: `.venv/bin/pip install --target DIR granian==2.8.9`), `granian, bare
  app` and `ours on granian`: the same bare app and this server served by granian, an HTTP server written in Rust
  for Python apps (its embedded server, one Rust thread, its Rust task implementation where Python has it), in
  uvicorn's place.

Prints the median and p90 of each, the server's CPU per request (from /proc) and the ratio to the reference. The
differences between neighbours are what each layer costs: the app (ours against our uvicorn's bare app),
uvicorn's protocol (against httptools + task), the parsing and the task (against asyncio).
Usage: .venv/bin/python bench/http_servers.py [--requests 4000] [--rounds 10] [--granian DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
from starlette.types import ASGIApp, Receive, Scope, Send

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import cpu_seconds, percentile, timed, wait_for_http
from bench.http_floor import REFERENCE, reference_server
from tests.conftest import free_port, launch_server

TOKEN_ENV, STATE_ENV, GRANIAN_ENV = "BENCH_TOKEN", "BENCH_STATE_DIR", "BENCH_GRANIAN"
"""What `--granian`'s child running this server is given: its token, its state directory, where granian is."""
BODY = b'{"status":"ok"}'
RESPONSE = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: " + str(len(BODY)).encode()
            + b"\r\n\r\n" + BODY)


# -- the servers this process runs as children (`--serve KIND PORT`) ---------------------------------------------

class Constant(asyncio.Protocol):
    """Answers each request with RESPONSE as soon as its head's end has arrived; parses nothing."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if data.endswith(b"\r\n\r\n"):
            self.transport.write(RESPONSE)


class ParsedInTask(asyncio.Protocol):
    """Parses each request with httptools and answers it from a task of its own."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        import httptools

        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.loop = asyncio.get_running_loop()
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_message_complete(self) -> None:
        scope = {"type": "http", "method": self.parser.get_method().decode(), "path": self.url.decode(),
                 "headers": self.headers}
        self.url, self.headers = b"", []
        self.loop.create_task(self.answer(scope))

    async def answer(self, scope: Scope) -> None:
        self.transport.write(RESPONSE)


async def bare_app(scope: Scope, receive: Receive, send: Send) -> None:
    """An ASGI app answering every request with BODY (and its lifespan, which `serve` runs)."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]})
    await send({"type": "http.response.body", "body": BODY})


def granian_server(app: ASGIApp, host: str, port: int, interface: str) -> None:
    """Serve `app` with granian's embedded server (`--granian`: on the path already), until the process is ended."""
    from granian.server.embed import Server  # installed by hand (the docstring), not a dependency

    task_impl = "rust" if sys.version_info < (3, 12) else "asyncio"  # granian's faster one, where it exists
    server = Server(app, address=host, port=port, interface=interface, log_enabled=False, task_impl=task_impl)
    asyncio.run(server.serve())


def serve(kind: str, port: int) -> None:
    if kind == "granian":
        granian_server(bare_app, "127.0.0.1", port, "asginl")
        return
    if kind == "ours-granian":  # this server as `sandbox-desktop server` runs it, on granian instead of uvicorn
        from api.cli import main as cli

        cli.serve = lambda app, host, port, log_level: granian_server(app, host, port, "asgi")
        cli.main(["server", "--port", str(port), "--log-level", "warning", "--token", os.environ[TOKEN_ENV],
                  "--state-dir", os.environ[STATE_ENV]])
        return
    if kind == "uvicorn":  # as it comes, with httptools: what an app served by uvicorn pays
        import uvicorn

        uvicorn.run(bare_app, host="127.0.0.1", port=port, loop="asyncio", http="httptools", log_level="warning",
                    lifespan="off", access_log=False)
        return
    if kind == "served":  # the server's own settings and patches of uvicorn (api/cli/main.py)
        import uvicorn

        from api.cli.main import uvicorn_config

        uvicorn.Server(uvicorn_config(bare_app, "127.0.0.1", port, "warning")).run()
        return
    protocol = {"asyncio": Constant, "httptools": ParsedInTask}[kind]

    async def run() -> None:
        server = await asyncio.get_running_loop().create_server(protocol, "127.0.0.1", port)
        await server.serve_forever()

    asyncio.run(run())


# -- the bench ------------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def child_server(kind: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, int]]:
    """One of the servers above in a child process; yields its URL and pid."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", kind, str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(url + "/v1/health", proc, f"the {kind} server")
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


def reference_pid(url: str) -> int | None:
    """The pid of the reference server listening at `url` (for its CPU), from `ss`."""
    port = url.rsplit(":", 1)[1]
    listing = subprocess.run(["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True).stdout
    marker = "pid="
    if marker not in listing:
        return None
    return int(listing.split(marker, 1)[1].split(",", 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=4000, help="timings per server (default 4000)")
    parser.add_argument("--rounds", type=int, default=10, help="alternating blocks (default 10)")
    parser.add_argument("--granian", type=Path, metavar="DIR", help="also granian's rows, granian installed in DIR")
    parser.add_argument("--serve", nargs=2, metavar=("KIND", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if GRANIAN_ENV in os.environ:
        sys.path.append(os.environ[GRANIAN_ENV])
    if args.serve:
        serve(args.serve[0], int(args.serve[1]))
        return

    with contextlib.ExitStack() as stack:
        servers: dict[str, tuple[str, int | None, dict[str, str]]] = {}  # URL, pid (for its CPU), headers
        for name, kind in (("asyncio", "asyncio"), ("httptools + task", "httptools"),
                           ("uvicorn, bare app", "uvicorn"), ("our uvicorn, bare app", "served")):
            url, pid = stack.enter_context(child_server(kind))
            servers[name] = (url, pid, {})
        ours = launch_server(Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-http-servers-"))))
        stack.callback(ours.stop)
        servers["ours"] = (ours.url, ours.proc.pid, {"Authorization": f"Bearer {ours.token}"})
        logged = launch_server(Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-http-servers-"))),
                               "--log-level", "info")
        stack.callback(logged.stop)
        servers["ours, access log"] = (logged.url, logged.proc.pid, {"Authorization": f"Bearer {logged.token}"})
        if args.granian is not None:
            url, pid = stack.enter_context(child_server("granian", {GRANIAN_ENV: str(args.granian)}))
            servers["granian, bare app"] = (url, pid, {})
            token = secrets.token_urlsafe(16)
            state = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-http-servers-"))
            url, pid = stack.enter_context(child_server("ours-granian", {GRANIAN_ENV: str(args.granian),
                                                                         TOKEN_ENV: token, STATE_ENV: state}))
            servers["ours on granian"] = (url, pid, {"Authorization": f"Bearer {token}"})
        if REFERENCE.exists():
            reference = stack.enter_context(reference_server())
            servers["reference"] = (reference, reference_pid(reference), {})
        else:
            print(f"(no reference server: {REFERENCE} is missing; run `npm ci` in tests/sdk for it)")

        clients = {name: stack.enter_context(httpx.Client(base_url=url, headers=headers, timeout=30))
                   for name, (url, _, headers) in servers.items()}
        calls = {name: (lambda client=client: client.get("/v1/health").raise_for_status()) for name, client
                 in clients.items()}
        for call in calls.values():
            timed(call, 100)  # warm each connection and code path
        samples: dict[str, list[float]] = {name: [] for name in servers}
        cpu = dict.fromkeys(servers, 0.0)
        block = max(1, args.requests // args.rounds)
        for round_ in range(args.rounds):
            order = list(servers) if round_ % 2 == 0 else list(reversed(servers))
            for name in order:
                server_pid = servers[name][1]
                before = cpu_seconds(server_pid) if server_pid else 0.0
                samples[name] += timed(calls[name], block)
                cpu[name] += (cpu_seconds(server_pid) - before) if server_pid else 0.0

        baseline = samples.get("reference")
        base = sorted(baseline)[len(baseline) // 2] if baseline else None
        print(f"{'GET /v1/health, kept alive':<22} {'median':>9} {'p90':>9} {'server CPU':>11}  ratio to the reference")
        for name, values in samples.items():
            median = sorted(values)[len(values) // 2]
            per_request = cpu[name] / len(values) * 1e6 if servers[name][1] else float("nan")
            ratio = f"{median / base:.2f}x" if base else "-"
            print(f"{name:<22} {median * 1000:7.3f} ms {percentile(values, 0.9) * 1000:6.3f} ms "
                  f"{per_request:8.0f} us  {ratio}")


if __name__ == "__main__":
    main()
