"""`sandbox-desktop desktops ...`: the server's many desktops from a shell (docs/desktops.md, docs/cli.md).

Results go to stdout one item a line, as every client command's do: `desktops create` prints the new id
alone, so `ID=$(sandbox-desktop desktops create)` works; the other client commands take `--desktop ID`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `sandbox-desktop server` builds these parsers without loading the client
    from sandbox_desktop_client import Client
    from sandbox_desktop_wire.desktops import DesktopResource

Handler = Callable[["Client", argparse.Namespace], None]
Command = Callable[[Any, str, Handler, str], argparse.ArgumentParser]
"""`cli_client`'s parser factory: a subcommand with `--url` and `--token` that runs `handler`."""


def out(text: str = "") -> None:
    print(text, flush=True)


def tag(text: str) -> tuple[str, str]:
    """`--tag key=value` (the value may hold `=`); anything else is a usage error (exit 2)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE such as agent=a1, got {text!r}")
    return key, value


def tags_of(args: argparse.Namespace) -> dict[str, str] | None:
    return dict(args.tag) if args.tag else None


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Columns padded to their widest cell; empty cells print as `-` so `awk '{print $N}'` stays aligned.
    One write: a reader that stops early (`| head -2`) is no broken pipe."""
    cells = [list(header), *([cell or "-" for cell in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    out("\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
                  for row in cells))


def size(desktop: DesktopResource) -> str:
    return f"{desktop.resolution.width}x{desktop.resolution.height}" if desktop.resolution else ""


def list_desktops(client: Client, args: argparse.Namespace) -> None:
    rows = [(d.id, d.state, d.display or "", size(d), ",".join(f"{k}={v}" for k, v in d.tags.items()),
             d.expires_at or "") for d in client.desktops.list(tags=tags_of(args))]
    table(("ID", "STATE", "DISPLAY", "SIZE", "TAGS", "EXPIRES"), rows)


def create(client: Client, args: argparse.Namespace) -> None:
    desktop = client.desktops.create(tags=tags_of(args), ttl_seconds=args.ttl,
                                     idle_timeout_seconds=args.idle_timeout, on_idle=args.on_idle,
                                     home_template=args.home_template, width=args.width, height=args.height)
    out(desktop.id)


def delete(client: Client, args: argparse.Namespace) -> None:
    client.desktops.delete(args.id)


def lifecycle(action: str) -> Handler:
    """`pause`, `resume` or `reset`: prints the desktop's id and the state it is in afterwards."""
    def handler(client: Client, args: argparse.Namespace) -> None:
        desktop = getattr(client.desktops.attach(args.id), action)()
        out(f"{desktop.id} {desktop.state}")

    return handler


def token(client: Client, args: argparse.Namespace) -> None:
    issued = client.desktops.attach(args.id).token(args.role, ttl_seconds=args.ttl)
    out(f"{issued.token}\n{issued.inspector_url}")  # one write, so `| head -1` takes the token cleanly


def add_desktops_commands(subparsers: argparse._SubParsersAction, command: Command) -> None:
    """Register `desktops ACTION` on the `sandbox-desktop` parser."""
    group = subparsers.add_parser("desktops", help="create, list, pause, resume, reset and delete desktops",
                                  description="The server's desktops (docs/desktops.md); the other commands "
                                              "act on one of them with --desktop ID.")
    actions = group.add_subparsers(dest="desktops_command", required=True, metavar="ACTION")
    p = command(actions, "list", list_desktops, "a table of the desktops: id, state, display, size, tags, expiry")
    p.add_argument("--tag", type=tag, action="append", metavar="KEY=VALUE",
                   help="only desktops carrying this tag (repeatable: all must match)")
    p = command(actions, "create", create, "create and start a desktop; prints its id alone")
    p.add_argument("--width", type=int)
    p.add_argument("--height", type=int)
    p.add_argument("--tag", type=tag, action="append", metavar="KEY=VALUE", help="a tag to find it by (repeatable)")
    p.add_argument("--ttl", type=int, metavar="SECONDS", help="delete it this long after its creation")
    p.add_argument("--idle-timeout", type=int, metavar="SECONDS",
                   help="delete (or pause, with --on-idle pause) it after this long without a request to it")
    p.add_argument("--on-idle", choices=["delete", "pause"], help="what the idle timeout does (default delete)")
    p.add_argument("--home-template", metavar="DIR",
                   help="an absolute directory on the server's machine copied into its HOME (and on reset)")
    for name, handler, help in (("delete", delete, "delete a desktop and everything it ran"),
                                ("pause", lifecycle("pause"), "freeze every process of a desktop"),
                                ("resume", lifecycle("resume"), "thaw a paused desktop"),
                                ("reset", lifecycle("reset"), "back to freshly started: apps gone, clipboard "
                                                              "empty, HOME from its template")):
        command(actions, name, handler, help).add_argument("id", metavar="ID")
    p = command(actions, "token", token, "a token for one desktop only; prints it, then the share URL")
    p.add_argument("id", metavar="ID")
    p.add_argument("--role", choices=["view", "control"], required=True,
                   help="view: watch only; control: drive this desktop")
    p.add_argument("--ttl", type=int, metavar="SECONDS", help="the token's lifetime (default 3600)")
