"""`sandbox-desktop server`'s TURN options: the relays the live view offers viewers (docs/streaming-turn.md).

Either TURN servers run elsewhere (`--turn-url`, with `--turn-secret` or `--turn-username/--turn-password`), or
one the server starts itself (`--turn local`: coturn, streaming/coturn.py). Secrets may come from the
environment so they stay off the process list. Only the standard library and streaming/turn.py are imported
here; coturn's module waits for `--turn local`.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from streaming.turn import DEFAULT_TTL_S, SharedSecret, StaticCredentials, TurnCredentials, TurnRelays, parse_turn_url

if TYPE_CHECKING:
    from streaming.coturn import LocalTurnOptions

TURN_SECRET_ENV = "SANDBOX_DESKTOP_TURN_SECRET"
TURN_PASSWORD_ENV = "SANDBOX_DESKTOP_TURN_PASSWORD"
SECRET_ENVS = (TURN_SECRET_ENV, TURN_PASSWORD_ENV)
LOCAL = "local"
OFF = "off"


def turn_url(text: str) -> str:
    try:
        return parse_turn_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def port_range(text: str) -> tuple[int, int]:
    low, sep, high = text.partition("-")
    if not sep or not low.strip().isdigit() or not high.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected LOW-HIGH such as 49160-49199, got {text!r}")
    return int(low), int(high)


def listen_address(text: str) -> tuple[str, int | None]:
    """`ADDR`, `ADDR:PORT` or `[IPV6]:PORT`."""
    host, port = text, None
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":") or None
    elif text.count(":") == 1:
        host, port = text.split(":")
    if port is not None and not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected ADDR[:PORT] such as 0.0.0.0:3478, got {text!r}")
    return host, int(port) if port is not None else None


def add_arguments(server: argparse.ArgumentParser) -> None:
    group = server.add_argument_group("TURN relay for the live view (docs/streaming-turn.md)")
    group.add_argument("--turn", choices=(OFF, LOCAL), default=OFF,
                       help="`local`: start coturn (`turnserver`) with the server and hand viewers its URLs with "
                            "per-viewer credentials (default off)")
    group.add_argument("--turn-url", action="append", type=turn_url, metavar="URL",
                       help="a TURN server viewers may relay through: turn:HOST[:PORT][?transport=udp|tcp] or "
                            "turns:HOST[:PORT] (repeatable; all share the credentials below)")
    group.add_argument("--turn-secret", metavar="SECRET",
                       help="the TURN servers' shared secret (coturn's static-auth-secret): each viewer gets a "
                            f"credential of its own that expires (default ${TURN_SECRET_ENV}; prefer the variable: "
                            "options show on the process list)")
    group.add_argument("--turn-username", metavar="NAME", help="one fixed TURN account for every viewer, instead "
                       "of --turn-secret")
    group.add_argument("--turn-password", metavar="PASSWORD",
                       help=f"its password (default ${TURN_PASSWORD_ENV})")
    group.add_argument("--turn-ttl", type=int, default=DEFAULT_TTL_S, metavar="SECONDS",
                       help=f"how long a viewer's TURN credential is valid (default {DEFAULT_TTL_S})")
    group.add_argument("--turn-server-relay", action="store_true",
                       help="the server's own peer also relays through the (first) TURN URL: for a server behind "
                            "a NAT that forwards none of its ports")
    group.add_argument("--turn-listen", type=listen_address, metavar="ADDR[:PORT]",
                       help="with --turn local: where coturn listens, UDP and TCP (default: the server's --host, "
                            "port 3478)")
    group.add_argument("--turn-relay-ports", type=port_range, metavar="LOW-HIGH",
                       help="with --turn local: coturn's relay ports, UDP, one per relayed viewer (default "
                            "49160-49199)")
    group.add_argument("--turn-public-host", metavar="HOST",
                       help="with --turn local: the host the TURN URLs name (default: the first "
                            "--webrtc-public-address, else the listen address, else this machine's first address)")


def external_relays(args: argparse.Namespace) -> TurnRelays | None:
    """`--turn-url` with its credentials; ValueError naming the option that is missing or wrong."""
    if not args.turn_url:
        for flag in ("turn_secret", "turn_username", "turn_password"):
            if getattr(args, flag):
                raise ValueError(f"--{flag.replace('_', '-')} needs --turn-url")
        return None
    credentials: TurnCredentials
    secret = args.turn_secret or os.environ.get(TURN_SECRET_ENV)
    if args.turn_username:
        password = args.turn_password or os.environ.get(TURN_PASSWORD_ENV)
        if not password:
            raise ValueError(f"--turn-username needs --turn-password or ${TURN_PASSWORD_ENV}")
        credentials = StaticCredentials(args.turn_username, password)
    elif secret:
        credentials = SharedSecret(secret, args.turn_ttl)
    else:
        raise ValueError(f"--turn-url needs --turn-secret (or ${TURN_SECRET_ENV}), or --turn-username and "
                         "--turn-password")
    return TurnRelays(tuple(args.turn_url), credentials, args.turn_server_relay)


def local_options(args: argparse.Namespace, public_addresses: tuple[str, ...]) -> LocalTurnOptions | None:
    """`--turn local` and its options; ValueError naming the option that is wrong."""
    local_only = ("turn_listen", "turn_relay_ports", "turn_public_host")
    if args.turn != LOCAL:
        for flag in local_only:
            if getattr(args, flag):
                raise ValueError(f"--{flag.replace('_', '-')} needs --turn local")
        return None
    if args.turn_url:
        raise ValueError("--turn local and --turn-url exclude each other")
    from streaming.coturn import DEFAULT_PORT, DEFAULT_RELAY_PORTS, LocalTurnOptions, turnserver_missing

    missing = turnserver_missing()
    if missing is not None:
        raise ValueError(missing)
    host, port = args.turn_listen or (args.host, None)
    return LocalTurnOptions(listen=host, port=port or DEFAULT_PORT, relay_ports=args.turn_relay_ports or
                            DEFAULT_RELAY_PORTS, public_host=args.turn_public_host,
                            public_addresses=public_addresses, ttl=args.turn_ttl,
                            server_relay=args.turn_server_relay)
