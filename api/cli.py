"""The `sandbox-desktop` command: `server` runs the service, `install desktop` installs its packages,
and the client commands (`status`, `screenshot`, `click`, ...) drive a running server."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from api import cli_client, mcp_server, probe
from api.cors import CorsPolicy
from api.logs import LOG_FORMATS, configure_logging
from desktop import installer
from desktop.parsing import ascii_int

if TYPE_CHECKING:
    from starlette.applications import Starlette

TOKEN_ENV = "SANDBOX_DESKTOP_TOKEN"
PUBLIC_ADDRESS_ENV = "SANDBOX_DESKTOP_WEBRTC_PUBLIC_ADDRESS"


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_size(text: str) -> tuple[int, int]:
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


def public_addresses(args: argparse.Namespace) -> tuple[str, ...]:
    """`--webrtc-public-address` flags, else the comma-separated environment variable (ArgumentTypeError)."""
    if args.webrtc_public_address:
        return tuple(args.webrtc_public_address)
    return tuple(parse_public_address(a) for a in os.environ.get(PUBLIC_ADDRESS_ENV, "").split(",") if a.strip())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sandbox-desktop", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    server = commands.add_parser("server", help="run the HTTP server")
    server.add_argument("-H", "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    server.add_argument("-p", "--port", type=int, default=2468, help="port to bind (default 2468)")
    server.add_argument("-t", "--token", default=os.environ.get(TOKEN_ENV) or None,
                        help=f"bearer token required on /v1 (default: ${TOKEN_ENV})")
    server.add_argument("-n", "--no-token", action="store_true",
                        help="run without a token, even on a non-loopback address")
    server.add_argument("-O", "--cors-allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="allow this browser origin (repeatable; `*` for any)")
    server.add_argument("-M", "--cors-allow-method", action="append", default=[], metavar="METHOD",
                        help="allowed CORS method (repeatable; default any)")
    server.add_argument("-A", "--cors-allow-header", action="append", default=[], metavar="HEADER",
                        help="allowed CORS request header (repeatable; default any)")
    server.add_argument("-C", "--cors-allow-credentials", action="store_true",
                        help="allow credentialed CORS requests")
    server.add_argument("--state-dir", type=Path, default=None,
                        help="where desktops keep home/, recordings/ and logs "
                             "(default $XDG_STATE_HOME/sandbox-desktop/desktop)")
    server.add_argument("--log-level", default="info",
                        choices=["critical", "error", "warning", "info", "debug"])
    server.add_argument("--log-format", default="text", choices=LOG_FORMATS,
                        help="text lines, or one JSON object per line for log collectors (default text)")
    server.add_argument("--no-process-api", action="store_true",
                        help="switch off /v1/processes (403) for deployments that only need the desktop")
    server.add_argument("--no-file-api", action="store_true",
                        help="switch off /v1/fs (403) for deployments that only need the desktop")
    server.add_argument("--webrtc-public-address", action="append", type=parse_public_address, metavar="ADDR",
                        help="IP address at which viewers reach the live view's UDP ports through a 1:1 NAT or "
                             f"port forwarding (repeatable; default: ${PUBLIC_ADDRESS_ENV}, comma-separated)")
    server.add_argument("--start-desktop", action="store_true", help="start a desktop with the server")
    server.add_argument("--desktop-size", type=parse_size, default=(1440, 900), metavar="WxH",
                        help="size of the desktop started by --start-desktop (default 1440x900)")

    install = commands.add_parser("install", help="install system packages")
    targets = install.add_subparsers(dest="target", required=True, metavar="TARGET")
    installer.add_arguments(targets.add_parser("desktop", help="the desktop's system packages"))
    probe.add_arguments(commands.add_parser("ready", help=probe.HELP, description=probe.HELP))
    cli_client.add_client_commands(commands)
    mcp_server.add_mcp_command(commands)
    return parser


def serve(app: Starlette, host: str, port: int, log_level: str) -> None:
    """Run uvicorn; on SIGTERM/SIGINT end open log follows at once, so shutdown does not wait on them."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            super().handle_exit(sig, frame)
            # A Python signal handler may run in the middle of a loop callback: hand over safely.
            asyncio.get_event_loop().call_soon_threadsafe(app.state.desktop.processes.end_follows)

    # Logging is configured already (configure_logging); the app writes its own access log, without queries.
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on", log_config=None,
                            access_log=False, timeout_graceful_shutdown=4)
    Server(config).run()


def run_server(args: argparse.Namespace) -> int:
    from api.app import ServerConfig, create_app
    from desktop.options import StartOptions

    token = None if args.no_token else args.token
    # Every process the desktop starts inherits our environment; none of them may learn the token.
    os.environ.pop(TOKEN_ENV, None)
    if token is not None and not token.strip():
        print(f"refusing an empty token: pass a real one with --token or {TOKEN_ENV} "
              "(e.g. `python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`)", file=sys.stderr)
        return 2
    if token is None and not args.no_token and not is_loopback(args.host):
        print(f"refusing to listen on {args.host} without a token: pass --token (or set {TOKEN_ENV}), "
              "or --no-token to run unprotected", file=sys.stderr)
        return 2
    try:
        public = public_addresses(args)
    except argparse.ArgumentTypeError as exc:
        print(f"sandbox-desktop: {PUBLIC_ADDRESS_ENV}: {exc}", file=sys.stderr)
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
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{host}:{args.port}"
    disabled = frozenset(name for name, off in (("processes", args.no_process_api), ("fs", args.no_file_api)) if off)
    config = ServerConfig(token=token, cors=cors, state_dir=state_dir, start_desktop=start, url=url,
                          disabled_apis=disabled, webrtc_public_addresses=public)
    configure_logging(args.log_level, args.log_format)
    app = create_app(config)
    print(f"sandbox-desktop: serving {url}/  (API document: /v1/openapi.json"
          f"{', token required' if token else ''})", file=sys.stderr, flush=True)
    serve(app, args.host, args.port, args.log_level)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if cli_client.is_client_command(args):
        return cli_client.run_client_command(args)
    if args.command == "server":
        return run_server(args)
    if args.command == "ready":
        return probe.run(args)
    if args.command == "install":
        return installer.run(args)
    if args.command == "mcp":
        return mcp_server.run_mcp(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
