"""A command of the operation table (api/cli/commands.json): its arguments, and the request they make.

Standard library only, as every client command's start is: the spec is JSON (api/cli/command_spec.py writes it).
Each field is one argument: `int`, `float` and `str` fields take that type; `enum` its choices; `bool`
`--x/--no-x`; `list` one or more values; `map` `KEY=VALUE` (repeatable); `json` a JSON text, `@FILE` or `@-`
(standard input); `value` (a union such as an element: id, number or query) JSON when it parses, else the
text. An option left out is not sent, so the server's default applies; `--json BODY` gives a whole body,
the options given are laid over it.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from sandbox_desktop_client.local_servers import DEFAULT_URL, DESKTOP_ENV, TOKEN_ENV, URL_ENV

SPEC_PATH = Path(__file__).with_name("commands.json")

Command = dict[str, Any]
"""One entry of commands.json: `words`, `op` (`METHOD path`), `summary`, `fields`, `body`, `media`, ..."""


class UsageError(Exception):
    """Arguments the CLI refuses before asking the server (exit 2, with the command's usage)."""


@functools.cache
def spec() -> dict[str, Any]:
    with open(SPEC_PATH, encoding="utf-8") as f:
        loaded: dict[str, Any] = json.load(f)
    return loaded


@functools.cache
def by_op() -> dict[str, Command]:
    """Every command by its operation, `METHOD path`."""
    return {c["op"]: c for c in spec()["commands"]}


def server_url(text: str) -> str:
    """`--url` (and `$SANDBOX_DESKTOP_URL`): an http(s) address, else a usage error (exit 2)."""
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port that is no number
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not a URL: {text!r} ({e})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"expected an http:// or https:// address such as {DEFAULT_URL} "
                                         f"(from --url or ${URL_ENV}), got {text!r}")
    return text


def add_connection(parser: argparse.ArgumentParser, targeted: bool) -> None:
    """`--url`, `--token`, `--timeout`, and `--desktop` for a command about one desktop."""
    group = parser.add_argument_group("connection")
    group.add_argument("--url", default=os.environ.get(URL_ENV) or DEFAULT_URL, type=server_url,
                       help=f"server address (default ${URL_ENV} or {DEFAULT_URL})")
    group.add_argument("--token", default=os.environ.get(TOKEN_ENV) or None,
                       help=f"bearer token (default ${TOKEN_ENV}, else the one a local server announced)")
    group.add_argument("--timeout", type=float, metavar="SECONDS",
                       help="give up when the server is silent this long (default 60, plus the waits asked for; "
                            "a stream never)")
    if targeted:
        group.add_argument("--desktop", default=os.environ.get(DESKTOP_ENV) or None, metavar="ID",
                           help=f"act on this desktop (default ${DESKTOP_ENV}, else the default desktop)")


def json_text(text: str) -> Any:
    """A JSON value given inline, as `@FILE`, or as `@-` (standard input)."""
    if text.startswith("@"):
        name = text[1:]
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        except OSError as e:
            raise argparse.ArgumentTypeError(f"cannot read {name}: {e.strerror or e}") from None
    try:
        return json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not JSON ({e}): {text[:80]!r}") from None


def json_or_text(text: str) -> Any:
    """A union's value: JSON when it parses (`5`, `{"name": "OK"}`), else the text itself (an element id)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def key_value(text: str) -> tuple[str, str]:
    """`KEY=VALUE` (the value may hold `=`); anything else is a usage error (exit 2)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


_TYPES: dict[str, Any] = {"int": int, "float": float, "str": str, "json": json_text, "value": json_or_text}


def dest(field: dict[str, Any]) -> str:
    return "field_" + field["name"].replace("-", "_")


def field_options(field: dict[str, Any]) -> dict[str, Any]:
    """`add_argument` keywords for one field."""
    kind = field["kind"]
    # argparse %-formats help: a `%` of a description must reach it doubled.
    options: dict[str, Any] = {"dest": dest(field), "help": field["help"].replace("%", "%%") or None,
                               "metavar": field["name"].upper().replace("-", "_")}
    if kind == "bool":
        options.update(action=argparse.BooleanOptionalAction, metavar=None)
    elif kind == "enum":
        options.update(choices=field["choices"], metavar=None)
    elif kind == "list":
        options.update(nargs="+", type=_TYPES[field["item"]])
    elif kind == "map":
        options.update(action="append", type=key_value, metavar="KEY=VALUE")
    else:
        options["type"] = _TYPES[kind]
        if kind in ("json", "value"):
            options["metavar"] += "_JSON"
    return options


def add_arguments(parser: argparse.ArgumentParser, command: Command, output: str = "optional",
                  tweaks: dict[str, dict[str, Any]] | None = None) -> None:
    """The command's arguments: its fields, `--json` for a body, `-i` for an upload, `-o` (`output`: optional,
    required or none), and the connection. `tweaks` changes fields' arguments by wire name: `flags`, `positional`,
    or any `add_argument` keyword (a hand-written command's shorter names, api/cli/client_commands.py)."""
    for field in command["fields"]:
        tweak = dict((tweaks or {}).get(field["wire"], {}))
        options = field_options(field)
        if tweak.pop("positional", field["positional"]):
            name = options.pop("dest")
            if field["kind"] == "list":  # `args`: the rest of the line is the command's (`run -- ls -la`)
                options.update(nargs=argparse.REMAINDER)
                options.pop("type")
            options["metavar"] = field["name"].upper().replace("-", "_") + ("..." if field["kind"] == "list" else "")
            if field["kind"] == "enum":  # a metavar hides the choices: the help names them
                options["help"] = " ".join(filter(None, [options["help"], f"({', '.join(field['choices'])})"]))
            parser.add_argument(name, **{**options, **tweak})
        else:
            # A body's required field may come in --json instead: checked once both are read (`request`).
            options["required"] = field["required"] and field["in"] != "body"
            if field["required"] and options["help"]:
                options["help"] += " (required)"
            parser.add_argument(*tweak.pop("flags", ["--" + field["name"]]), **{**options, **tweak})
    if command["body"]:
        parser.add_argument("--json", type=json_text, metavar="BODY", dest="json_body",
                            help="the JSON body, or @FILE, or @- for standard input; the options given are "
                                 "laid over it")
    if command["upload"]:
        parser.add_argument("-i", "--input", metavar="FILE",
                            help=f"send this file's bytes ({command['upload'][0]}); default: standard input")
    if command["ranges"]:
        parser.add_argument("--range", metavar="BYTES", help="only these bytes: `bytes=0-1023`, `bytes=-4096`")
    if output != "none":
        parser.add_argument("-o", "--output", metavar="FILE", required=output == "required",
                            help="write the answer to FILE (`-`: standard output); a binary answer goes to "
                                 "standard output only when it is not a terminal")
    add_connection(parser, command["desktop"])


def path_id(value: str) -> str:
    if not value or "/" in value:
        raise ValueError(f"not an id: {value!r}")
    return quote(value, safe="")


def desktop_path(path: str, desktop: str | None) -> str:
    """`/v1/desktop/<p>` of the desktop `--desktop` names: `/v1/desktops/{id}/<p>` (docs/desktops.md)."""
    if desktop is None or not path.startswith("/v1/desktop/"):
        return path
    return f"/v1/desktops/{path_id(desktop)}/" + path.removeprefix("/v1/desktop/")


def _query_value(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def request(command: Command, args: argparse.Namespace) -> tuple[str, list[tuple[str, str]], dict[str, Any] | None]:
    """(path, query, JSON body) of the request the parsed arguments make."""
    path = command["op"].split(" ", 1)[1]
    query: list[tuple[str, str]] = []
    body: dict[str, Any] | None = None
    if command["body"]:
        given = getattr(args, "json_body", None)
        if given is not None and not isinstance(given, dict):
            raise UsageError("--json: expected a JSON object")
        body = dict(given or {})
    for field in command["fields"]:
        value = getattr(args, dest(field))
        if value is None or (field["kind"] == "list" and field["positional"] and not value):
            continue
        if field["kind"] == "map":
            value = dict(value)
        if field["in"] == "path":
            path = path.replace("{" + field["wire"] + "}", path_id(value))
        elif field["in"] == "query":
            query += [(field["wire"], _query_value(v)) for v in (value if isinstance(value, list) else [value])]
        elif body is not None:
            body[field["wire"]] = value
    missing = [f"--{f['name']}" for f in command["fields"]
               if f["in"] == "body" and f["required"] and body is not None and f["wire"] not in body]
    if missing:
        raise UsageError(f"the following arguments are required: {', '.join(missing)} (or in --json)")
    return desktop_path(path, getattr(args, "desktop", None)), query, body


def timeout(command: Command, args: argparse.Namespace, query: list[tuple[str, str]],
            body: dict[str, Any] | None) -> float | None:
    """Seconds of silence to give up after: `--timeout`, else 60 plus what the call asks the server to wait
    (`timeoutMs`, `waitMs`, ...); a stream (events, followed logs) waits as long as it runs."""
    if args.timeout is not None:
        return float(args.timeout)
    if command["stream"]:
        return None
    given = {**dict(query), **(body or {})}
    waits = [given[name] for name in command["waits"] if name in given]
    # ASCII digits only ("³" is a digit to str.isdigit(), not to int()); no server module: the CLI starts without.
    return 60.0 + sum(int(w) for w in map(str, waits) if w.isascii() and w.isdigit()) / 1000
