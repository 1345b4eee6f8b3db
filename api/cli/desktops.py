"""`sandbox-desktop desktops ...`: the server's many desktops from a shell (docs/desktops.md, docs/cli.md).

Results go to stdout one item a line, as every client command's do: `desktops create` prints the new id
alone, so `ID=$(sandbox-desktop desktops create)` works; the other client commands take `--desktop ID`.
The table's `desktops` commands (`get`, `ready`) print their JSON; these print tables and ids.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from api.cli.calls import Answer, Api
from api.cli.operation_args import key_value
from api.cli.tree import Leaf, Words, entry, own


def out(text: str = "") -> None:
    print(text, flush=True)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Columns padded to their widest cell; empty cells print as `-` so `awk '{print $N}'` stays aligned.
    One write: a reader that stops early (`| head -2`) is no broken pipe."""
    cells = [list(header), *([cell or "-" for cell in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    out("\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
                  for row in cells))


def size(desktop: dict[str, Any]) -> str:
    resolution = desktop.get("resolution")
    return f"{resolution['width']}x{resolution['height']}" if resolution else ""


def list_arguments(parser: argparse.ArgumentParser) -> None:
    # GET /v1/desktops reads `?tag=` itself: the table has no query model to derive the option from.
    parser.add_argument("--tag", type=key_value, action="append", metavar="KEY=VALUE",
                        help="only desktops carrying this tag (repeatable: all must match)")


def list_desktops(api: Api, args: argparse.Namespace) -> None:
    query = [("tag", f"{key}={value}") for key, value in args.tag or ()]
    listed = api.send("GET", "/v1/desktops", query=query).json()["desktops"]
    rows = [(d["id"], d["state"], d.get("display") or "", size(d),
             ",".join(f"{k}={v}" for k, v in (d.get("tags") or {}).items()), d.get("expiresAt") or "")
            for d in listed]
    table(("ID", "STATE", "DISPLAY", "SIZE", "TAGS", "EXPIRES"), rows)


def state(answer: Answer, args: argparse.Namespace) -> None:
    desktop = answer.json()
    out(f"{desktop['id']} {desktop['state']}")


def token(answer: Answer, args: argparse.Namespace) -> None:
    issued = answer.json()
    out(f"{issued['token']}\n{issued['inspectorUrl']}")  # one write, so `| head -1` takes the token cleanly


ID = {"desktop_id": {"metavar": "ID"}}
ONE = "/v1/desktops/{desktop_id}"

COMMANDS: dict[Words, Leaf] = {
    ("desktops", "list"): own("a table of the desktops: id, state, display, size, tags, expiry", list_arguments,
                              list_desktops, op="GET /v1/desktops", targeted=False),
    ("desktops", "create"): entry("POST /v1/desktops", lambda a, _: out(a.json()["id"]),
                                  help="create and start a desktop; prints its id alone", tweaks={
        "tags": {"flags": ["--tag"], "help": "a tag to find it by (repeatable)"},
        "ttlSeconds": {"flags": ["--ttl"], "metavar": "SECONDS"},
        "idleTimeoutSeconds": {"flags": ["--idle-timeout"], "metavar": "SECONDS"},
        "onIdle": {"choices": ["delete", "pause"], "metavar": None},
        "homeTemplate": {"metavar": "DIR", "help": "an absolute directory on the server's machine copied into its "
                                                   "HOME (and on reset)"}}),
    ("desktops", "delete"): entry(f"DELETE {ONE}", help="delete a desktop and everything it ran", tweaks=ID),
    ("desktops", "pause"): entry(f"POST {ONE}/pause", state, help="freeze every process of a desktop", tweaks=ID),
    ("desktops", "resume"): entry(f"POST {ONE}/resume", state, help="thaw a paused desktop", tweaks=ID),
    ("desktops", "reset"): entry(f"POST {ONE}/reset", state, tweaks=ID,
                                 help="back to freshly started: apps gone, clipboard empty, HOME from its template"),
    ("desktops", "token"): entry(f"POST {ONE}/tokens", token, help="a token for one desktop only; prints it, then "
                                                                   "the share URL", tweaks={
        **ID, "role": {"positional": False, "flags": ["--role"], "required": True, "choices": ["view", "control"],
                       "metavar": None, "help": "view: watch only; control: drive this desktop"},
        "ttlSeconds": {"flags": ["--ttl"], "metavar": "SECONDS", "help": "the token's lifetime (default 3600)"}}),
}

GROUPS: dict[Words, tuple[str, str | None]] = {
    ("desktops",): ("create, list, pause, resume, reset and delete desktops",
                    "The server's desktops (docs/desktops.md); the other commands act on one of them with "
                    "--desktop ID."),
}
