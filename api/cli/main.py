"""The `sandbox-desktop` command: `server` runs the service, `install desktop` installs its packages, `ready`
probes it, `mcp` serves MCP, and the client commands (`status`, `windows list`, `processes run`, ...: every
operation of the API, api/cli/tree.py) drive a running server.

The server's modules are imported by the `server`, `install` and `mcp` commands alone, when they run or
show their help: the other commands start on the standard library (docs/cli.md, Start-up)."""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from api.cli import client_commands, desktops, probe
from api.cli.tree import Leaf, Node, Words, build_tree, parser_for
from sandbox_desktop_client.local_servers import TOKEN_ENV

if TYPE_CHECKING:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.types import ASGIApp

    from desktop.lifecycle.policy import DesktopPolicy
    from desktop.sandbox.users import UidRange
    from sandbox_desktop_wire.approvals import ActionKind

PUBLIC_ADDRESS_ENV = "SANDBOX_DESKTOP_WEBRTC_PUBLIC_ADDRESS"
ISOLATION_ENV = "SANDBOX_DESKTOP_ISOLATION"
DESCRIPTION = ("Virtual Linux desktops driven over HTTP. `server` runs the service; the other commands drive a "
               "running one, each an operation of its API (docs/cli.md). `sandbox-desktop COMMAND --help` says more.")
MCP_HELP = "serve the desktops as MCP tools over stdio (for Claude Desktop, Cursor, ...)"


def parse_size(text: str) -> tuple[int, int]:
    from desktop.core.parsing import ascii_int

    first, sep, second = text.lower().partition("x")
    width, height = ascii_int(first), ascii_int(second)
    if not sep or width is None or height is None:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 1440x900, got {text!r}")
    return width, height


def parse_public_address(text: str) -> str:
    """An IP literal a viewer can send to (no host names: a candidate carries an address)."""
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an IP address such as 203.0.113.7 or 127.0.0.1, got {text!r} "
                                         "(host names are not resolved)") from None
    if address.is_unspecified or address.is_multicast:
        raise argparse.ArgumentTypeError(f"{text!r} is not an address a viewer can send to")
    return str(address)


def sandbox_uids(text: str) -> UidRange:
    """`--sandbox-uids FIRST-LAST` (and `$SANDBOX_DESKTOP_UIDS`, its default)."""
    from desktop.sandbox.users import UidRange

    try:
        return UidRange.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def public_addresses(args: argparse.Namespace) -> tuple[str, ...]:
    """`--webrtc-public-address` flags, else the comma-separated environment variable (ArgumentTypeError)."""
    if args.webrtc_public_address:
        return tuple(args.webrtc_public_address)
    return tuple(parse_public_address(a) for a in os.environ.get(PUBLIC_ADDRESS_ENV, "").split(",") if a.strip())


def approve_kinds(text: str) -> frozenset[ActionKind]:
    """`--approve`: `pointer,type,key,launch,process` (any of them) or `all`."""
    from sandbox_desktop_wire.approvals import parse_kinds

    try:
        return parse_kinds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def desktop_policy(text: str) -> DesktopPolicy:
    """`--desktop-policy FILE`: the policy in it, else a usage error naming the key that is wrong."""
    from desktop.lifecycle.policy import DesktopPolicy

    try:
        return DesktopPolicy.load(Path(text).expanduser())
    except (OSError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_server_arguments(server: argparse.ArgumentParser) -> None:
    from api.cli import turn_options
    from api.mcp import server as mcp_server
    from api.middleware.browser_guard import ALLOWED_HOSTS_ENV
    from api.server.config import MCP_TOOL_TIMEOUT_S
    from api.server.logs import LOG_FORMATS
    from desktop.sandbox import users
    from desktop.sandbox.host import Isolation
    from sandbox_desktop_wire.approvals import DEFAULT_APPROVAL_TIMEOUT_S, ActionKind
    from sandbox_desktop_wire.enums import TakeoverMode

    server.add_argument("-H", "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    server.add_argument("-p", "--port", type=int, default=2468, help="port to bind (default 2468)")
    server.add_argument("-t", "--token", default=os.environ.get(TOKEN_ENV) or None,
                        help=f"bearer token required on /v1 (default: ${TOKEN_ENV})")
    server.add_argument("-n", "--no-token", action="store_true",
                        help="run without a token (default: a random token kept in the state directory, "
                             "which local clients find by themselves)")
    server.add_argument("--allowed-host", action="append", default=[], metavar="HOST",
                        help="also answer to this Host name: NAME, *.DOMAIN or an IP, optionally :PORT, or * for "
                             "any (repeatable; default: "
                             f"${ALLOWED_HOSTS_ENV}, comma-separated). Loopback binds answer to localhost, "
                             "*.localhost, 127.0.0.1 and [::1] on their port; other binds check names only "
                             "when this is given")
    server.add_argument("-O", "--cors-allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="allow this browser origin (repeatable; `*` for any)")
    server.add_argument("-M", "--cors-allow-method", action="append", default=[], metavar="METHOD",
                        help="allowed CORS method (repeatable; default any)")
    server.add_argument("-A", "--cors-allow-header", action="append", default=[], metavar="HEADER",
                        help="allowed CORS request header (repeatable; default any)")
    server.add_argument("-C", "--cors-allow-credentials", action="store_true",
                        help="allow credentialed CORS requests")
    server.add_argument("--state-dir", type=Path, default=None,
                        help="where desktops keep home/, recordings/ and logs, and the server its generated "
                             "token (default $XDG_STATE_HOME/sandbox-desktop/desktop)")
    server.add_argument("--log-level", default="info",
                        choices=["critical", "error", "warning", "info", "debug"])
    server.add_argument("--log-format", default="text", choices=LOG_FORMATS,
                        help="text lines, or one JSON object per line for log collectors (default text)")
    server.add_argument("--no-process-api", action="store_true",
                        help="switch off /v1/processes (403) for deployments that only need the desktop")
    server.add_argument("--no-file-api", action="store_true",
                        help="switch off /v1/fs (403) for deployments that only need the desktop")
    server.add_argument("--no-mcp-api", action="store_true",
                        help="switch off the MCP endpoint /v1/mcp (403)")
    server.add_argument("--mcp-allow", type=mcp_server.tool_list, action="extend", metavar="TOOL[,TOOL...]",
                        help="/v1/mcp offers only these tools (repeatable; default all), as `mcp --allow`")
    server.add_argument("--mcp-timeout", type=mcp_server.positive, default=MCP_TOOL_TIMEOUT_S,
                        metavar="SECONDS", help="/v1/mcp fails a tool call that takes longer "
                        f"(default {MCP_TOOL_TIMEOUT_S:g}), as `mcp --timeout`")
    server.add_argument("--webrtc-public-address", action="append", type=parse_public_address, metavar="ADDR",
                        help="IP address at which viewers reach the live view's UDP ports through a 1:1 NAT or "
                             f"port forwarding (repeatable; default: ${PUBLIC_ADDRESS_ENV}, comma-separated)")
    server.add_argument("--max-desktops", type=int, default=16, metavar="N",
                        help="desktops the server holds at once, the default one included while it runs "
                             "(default 16; one more is a 429 too_many_desktops)")
    server.add_argument("--isolation", default=os.environ.get(ISOLATION_ENV) or "auto", choices=list(Isolation),
                        help="make each desktop a sandbox of its own uid, namespaces, cgroup and network: the "
                             "strongest this machine allows (auto, the default), only if it can isolate fully "
                             f"(required), or not at all (off); default ${ISOLATION_ENV} or auto; docs/security.md")
    server.add_argument("--xauthority", type=Path, metavar="FILE",
                        help="keep the server's X cookies (one per desktop) in FILE, which X clients of this "
                             "machine may read to open the desktops' displays (default: <state dir>/xauthority)")
    server.add_argument("--sandbox-uids", type=sandbox_uids, default=os.environ.get(users.UIDS_ENV) or None,
                        metavar="FIRST-LAST",
                        help="the uids desktops run as, one each (default: $SANDBOX_DESKTOP_UIDS or "
                             f"{users.UidRange()}); in a user namespace, a range it maps (a Kubernetes pod with "
                             "hostUsers: false: 10000-65533; docs/kubernetes.md)")
    server.add_argument("--share", type=Path, action="append", metavar="PATH",
                        help="a host folder every desktop sees at the same path, with its own permissions "
                             "(repeatable; docs/security.md)")
    server.add_argument("--osworld-python", type=Path, default=None, metavar="DIR",
                        help="the desktops' Python for OSWorld tasks (a venv with pyautogui; default "
                             "/opt/sandbox-desktop/osworld-python, made by `sandbox-desktop install osworld`), on the "
                             "PATH of desktops created with osworld (docs/osworld.md)")
    server.add_argument("--desktop-policy", type=desktop_policy, default=None, metavar="FILE",
                        help="impose a JSON policy on every desktop created here: tags, caps on its timers, its "
                             "network rules, caps on its limits (docs/desktops.md \"What the server imposes\")")
    server.add_argument("--takeover", type=TakeoverMode, default=TakeoverMode.REFUSE,
                        choices=list(TakeoverMode), metavar="|".join(TakeoverMode),
                        help="agent input while a person holds control in the live view: refuse it with 409 "
                             "desktop_controlled_by_viewer (default), queue it until released, or share control")
    server.add_argument("--approve", type=approve_kinds, default=frozenset(), metavar="KINDS",
                        help=f"hold these kinds of agent actions until a person approves them in the inspector or "
                             f"with POST /v1/approvals/ID: a comma list of {','.join(ActionKind)}, or all (default "
                             "none; a desktop created with `approve` has its own; docs/approvals.md)")
    server.add_argument("--approval-timeout", type=mcp_server.positive, default=DEFAULT_APPROVAL_TIMEOUT_S,
                        metavar="SECONDS", help="a held action nobody decides on within this long is refused with "
                        f"403 approval_expired (default {DEFAULT_APPROVAL_TIMEOUT_S:g}; a request's "
                        "`Prefer: wait=N` sets its own)")
    server.add_argument("--start-desktop", action="store_true", help="start a desktop with the server")
    server.add_argument("--desktop-size", type=parse_size, default=(1440, 900), metavar="WxH",
                        help="size of the desktop started by --start-desktop (default 1440x900)")
    turn_options.add_arguments(server)
    server.set_defaults(run=run_server)


def add_install_arguments(parser: argparse.ArgumentParser) -> None:
    from desktop.lifecycle import installer

    installer.add_arguments(parser)
    parser.set_defaults(run=installer.run)


def add_install_osworld_arguments(parser: argparse.ArgumentParser) -> None:
    from desktop.lifecycle import osworld_install

    osworld_install.add_arguments(parser)
    parser.set_defaults(run=osworld_install.run)


def add_mcp_arguments(parser: argparse.ArgumentParser) -> None:
    from api.mcp import server as mcp_server

    mcp_server.add_arguments(parser)
    parser.set_defaults(run=mcp_server.run_mcp)


def add_ready_arguments(parser: argparse.ArgumentParser) -> None:
    probe.add_arguments(parser)
    parser.set_defaults(run=probe.run)


PROGRAMS: dict[Words, Leaf] = {
    ("server",): Leaf("run the HTTP server", add_server_arguments),
    ("install", "desktop"): Leaf("the desktop's system packages", add_install_arguments),
    ("install", "osworld"): Leaf("the apps OSWorld's tasks drive, and the desktops' Python with pyautogui",
                                 add_install_osworld_arguments),
    ("ready",): Leaf(probe.HELP, add_ready_arguments, "GET /v1/health/ready", probe.HELP),
    ("mcp",): Leaf(MCP_HELP, add_mcp_arguments, description=MCP_HELP),
}


def command_tree() -> Node:
    return build_tree({**PROGRAMS, **client_commands.COMMANDS, **desktops.COMMANDS},
                      {("install",): ("install system packages", None), **client_commands.GROUPS,
                       **desktops.GROUPS})


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv`, with only the command it names built; every command's when None."""
    return parser_for(command_tree(), argv, prog="sandbox-desktop", description=DESCRIPTION)


def serve(app: Starlette, host: str, port: int, log_level: str) -> None:
    """Run uvicorn; on SIGTERM/SIGINT end open log follows at once, so shutdown does not wait on them."""
    import asyncio

    import uvicorn

    from api.cli import stalled_peers, uvicorn_pin
    from api.server import stack_dump

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            super().handle_exit(sig, frame)
            # A Python signal handler may run in the middle of a loop callback: hand over safely.
            asyncio.get_event_loop().call_soon_threadsafe(app.state.services.processes.end_follows)

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            stalls = asyncio.create_task(stalled_peers.abort_stalled(self.server_state.connections)) \
                if uvicorn_pin.pinned() else None  # peers that read nothing do not hold the exit (its docstring)
            try:
                await super().shutdown(sockets)
            finally:
                if stalls is not None:
                    stalls.cancel()

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            stack_dump.install(asyncio.get_running_loop())  # `kill -USR1`: what every task waits on, in the log
            for listener in getattr(self, "servers", []):  # absent when the start failed
                for sock in listener.sockets:
                    limit_unsent(sock)

    Server(uvicorn_config(app, host, port, log_level)).run()


def uvicorn_config(app: ASGIApp, host: str, port: int, log_level: str) -> uvicorn.Config:
    """How the server runs on uvicorn: its settings, with its patches of uvicorn installed (bench/http_servers.py
    serves a bare app the same way, to tell uvicorn's share of a request from the app's)."""
    import uvicorn

    from api.cli import parser_refusals, response_writes, ws_reading

    # Logging is configured already (configure_logging); the app writes its own access log, without queries.
    # httptools (a dependency) rather than h11: every request pays the HTTP floor (docs/benchmarks.md, HTTP floor).
    # Not uvloop, though faster still: libuv spawns children its own way, so a script without `#!` would run
    # under /bin/sh instead of being refused, and a tty process's preexec_fn fails (docs/processes.md, Errors).
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on", log_config=None,
                            access_log=False, timeout_graceful_shutdown=4, timeout_keep_alive=KEEP_ALIVE_S,
                            loop="asyncio", http="httptools", server_header=False,  # no software named to clients
                            ws=ws_reading.protocol(),  # fewer stops of reading (api/cli/ws_reading.py)
                            ws_per_message_deflate=WS_DEFLATE)
    response_writes.install()  # a response's head and body in one write (api/cli/response_writes.py)
    parser_refusals.install()  # what the HTTP parser refuses is a problem document too (api/cli/parser_refusals.py)
    return config


WS_DEFLATE = False
"""WebSocket messages go as HTTP answers go, uncompressed. Offered permessage-deflate by a client (websockets and
most browsers offer it), uvicorn deflated every message: a command socket's move and click answers, its
screenshots (a PNG deflated again, a JPEG that does not deflate at all), the live view's video; and inflated each
message the client sent. That was 60-70 us of the server's CPU on a move or click and 360-450 us on a screenshot
(`bench/before_after.py`; docs/benchmarks.md, "Uncompressed messages"), and the client's inflating and deflating
besides."""

KEEP_ALIVE_S = 75
"""How long an idle kept-alive HTTP connection stays open (uvicorn's default is 5 s). httpx, and so this project's
client, drops its idle connections after 5 s too: a request sent on one just as the server closed it failed with
a read error (a POST is not retried), which an agent pausing about 5 s between steps met now and then, as did 64
desktops stepping at once in bench/sandbox_density.py. Longer than the clients' own expiry, the client always lets
go first; 75 s is nginx's default."""

UNSENT_LIMIT = 128 * 1024
"""Bytes a connection may hold written but not yet sent (TCP_NOTSENT_LOWAT): a live-view WebSocket whose viewer
reads slowly then makes the server's sends wait after ~0.5 s of video, not after the kernel's 4 MB send buffer
(20 s at 1.5 Mbps), so it skips to a keyframe instead of queueing (docs/streaming.md, "Rate control"). Bytes in
flight do not count: downloads over long links are not slowed."""


def limit_unsent(sock: socket.socket) -> None:
    """Set UNSENT_LIMIT on a listening TCP socket; its connections inherit it (a no-op where unsupported)."""
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, "TCP_NOTSENT_LOWAT", 25), UNSENT_LIMIT)


def allowed_hosts(args: argparse.Namespace) -> tuple[str, ...]:
    """`--allowed-host` flags, else the comma-separated environment variable."""
    from api.middleware.browser_guard import ALLOWED_HOSTS_ENV

    if args.allowed_host:
        return tuple(args.allowed_host)
    return tuple(h.strip() for h in os.environ.get(ALLOWED_HOSTS_ENV, "").split(",") if h.strip())


def display_url(host: str, port: int) -> str:
    """The address to print: a wildcard bind is reached on this machine at 127.0.0.1 (or [::1])."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def run_server(args: argparse.Namespace) -> int:
    from api.app import create_app
    from api.cli import turn_options
    from api.middleware.browser_guard import HostPolicy
    from api.middleware.cors import CorsPolicy
    from api.server import descriptors
    from api.server.config import McpOptions, ServerConfig
    from api.server.logs import configure_logging
    from desktop.lifecycle.options import StartOptions, default_state_dir
    from desktop.lifecycle.policy import DesktopPolicy
    from desktop.lifecycle.vm_image import DESKTOPS_PYTHON
    from desktop.sandbox.host import Isolation
    from desktop.sandbox.users import UidRange
    from sandbox_desktop_client import local_servers

    token = None if args.no_token else args.token
    # Every process the desktop starts inherits our environment; none of them may learn the token.
    os.environ.pop(TOKEN_ENV, None)
    if token is not None and not token.strip():
        print(f"refusing an empty token: pass a real one with --token or {TOKEN_ENV} "
              "(e.g. `python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`)", file=sys.stderr)
        return 2
    try:
        public = public_addresses(args)
    except argparse.ArgumentTypeError as exc:
        print(f"sandbox-desktop: {PUBLIC_ADDRESS_ENV}: {exc}", file=sys.stderr)
        return 2
    try:
        local_turn, turn = turn_options.local_options(args, public), turn_options.external_relays(args)
    except ValueError as exc:
        print(f"sandbox-desktop: {exc}", file=sys.stderr)
        return 2
    for name in turn_options.SECRET_ENVS:  # read: no process the desktops start may inherit them
        os.environ.pop(name, None)
    if args.max_desktops < 1:
        print("sandbox-desktop: --max-desktops must be at least 1", file=sys.stderr)
        return 2
    try:
        hosts = HostPolicy.for_bind(args.host, args.port, allowed_hosts(args))
    except ValueError as exc:
        print(f"sandbox-desktop: --allowed-host: {exc}", file=sys.stderr)
        return 2
    cors = CorsPolicy(
        origins=tuple(args.cors_allow_origin),
        methods=tuple(m.upper() for m in args.cors_allow_method) or ("*",),
        headers=tuple(args.cors_allow_header) or ("*",),
        credentials=args.cors_allow_credentials,
    )
    start = None
    if args.start_desktop:
        width, height = args.desktop_size
        start = StartOptions(width=width, height=height)
    state_dir = args.state_dir.expanduser().resolve() if args.state_dir else None
    url = display_url(args.host, args.port)
    token_file = None
    if token is None and not args.no_token:
        try:
            token, token_file = local_servers.load_or_create_token(state_dir or default_state_dir())
        except OSError as exc:
            print(f"sandbox-desktop: cannot keep a generated token in {state_dir or default_state_dir()}: {exc}; "
                  "pass --state-dir, or --token", file=sys.stderr)
            return 2
    disabled = frozenset(name for name, off in (("processes", args.no_process_api), ("fs", args.no_file_api),
                                                ("mcp", args.no_mcp_api)) if off)
    # A server on port 0 cannot say which port it got before it binds: it is not announced.
    announce = (args.port, token_file) if token_file is not None and args.port != 0 else None
    xauthority = (args.xauthority or (state_dir or default_state_dir()) / "xauthority").expanduser().resolve()
    config = ServerConfig(token=token, cors=cors, hosts=hosts, state_dir=state_dir, start_desktop=start, url=url,
                          bind_host=args.host,
                          disabled_apis=disabled, webrtc_public_addresses=public, announce=announce,
                          turn=turn, local_turn=local_turn,
                          max_desktops=args.max_desktops, takeover=args.takeover, approve=args.approve,
                          approval_timeout=args.approval_timeout,
                          mcp=McpOptions(tuple(args.mcp_allow or ()), args.mcp_timeout),
                          isolation=Isolation(args.isolation), xauthority=xauthority,
                          shared=tuple(path.expanduser().resolve() for path in args.share or ()),
                          desktop_policy=args.desktop_policy or DesktopPolicy(),
                          sandbox_uids=args.sandbox_uids or UidRange(),
                          osworld_python=(args.osworld_python or DESKTOPS_PYTHON).expanduser().absolute())
    configure_logging(args.log_level, args.log_format)
    # Before any desktop: each holds tens of descriptors in this process (api/server/descriptors.py).
    descriptors.raise_limit()
    # The server's X clients (screenshots, input, the live view) find each sandboxed desktop's cookie here.
    os.environ["XAUTHORITY"] = str(xauthority)
    app = create_app(config)
    print(f"sandbox-desktop: serving {url}/  (API document: /v1/openapi.json"
          f"{', token required' if token else ''})", file=sys.stderr, flush=True)
    if token_file is not None and token is not None:
        print(f"sandbox-desktop: inspector: {url}/ui/#token={token}  (token kept in {token_file}; "
              "local clients find it there)", file=sys.stderr, flush=True)
    elif token is None:
        print("sandbox-desktop: warning: --no-token: every local user and every process of this machine can drive "
              "the desktop and run commands through it", file=sys.stderr, flush=True)
    serve(app, args.host, args.port, args.log_level)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
