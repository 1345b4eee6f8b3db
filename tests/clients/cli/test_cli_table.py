"""The CLI against the operation table, without a server: the checked-in spec is the table's, every operation
is a command the parser reaches and turns into its request, and the CLI starts without the server's modules."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

import pytest

from api.app import collect_operations
from api.cli import command_spec
from api.cli.main import build_parser, command_tree
from api.cli.operation_args import SPEC_PATH, Command, UsageError, dest, request, spec
from api.cli.tree import find
from tests.support.paths import REPO

OPERATIONS = [op for op in collect_operations() if not op.upgrade]
SAMPLE = {"int": "7", "float": "0.5", "str": "x", "value": "7", "json": "{}", "map": "k=v"}


def test_the_checked_in_spec_is_the_tables() -> None:
    assert SPEC_PATH.read_text() == command_spec.current(), "run `python -m api.cli.command_spec`"


def test_the_spec_holds_every_operation_once() -> None:
    keys = [c["op"] for c in spec()["commands"]]
    assert sorted(keys) == sorted(f"{op.method} {op.path}" for op in OPERATIONS)
    assert spec()["websockets"] == [f"{op.method} {op.path}" for op in collect_operations() if op.upgrade]


def sample(field: dict[str, Any]) -> list[str]:
    """Command-line words giving `field` a valid-looking value."""
    kind = field["kind"]
    value = field["choices"][0] if kind == "enum" else SAMPLE.get(kind, "x")
    if field["positional"]:
        return [value]
    if kind == "bool":
        return ["--" + field["name"]]
    return ["--" + field["name"], value]


def argv_for(command: Command) -> list[str]:
    """The command's words with every required argument (positionals first, as the parser reads them)."""
    positional = [w for f in command["fields"] if f["positional"] for w in sample(f)]
    required = [w for f in command["fields"] if f["required"] and not f["positional"] for w in sample(f)]
    return [*command["words"], *required, "--url", "http://127.0.0.1:1", *positional]


@pytest.mark.parametrize("command", spec()["commands"], ids=lambda c: " ".join(c["words"]))
def test_every_operation_is_a_command_that_makes_its_request(command: Command,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The words reach a command of that operation (hand-written or generated), whose help shows and whose
    arguments parse; a generated command's request is the operation's path with its parameters filled in."""
    node = find(command_tree(), tuple(command["words"]))
    assert node is not None and node.leaf is not None and node.leaf.op == command["op"], command["words"]
    with pytest.raises(SystemExit) as shown:
        build_parser([*command["words"], "--help"]).parse_args([*command["words"], "--help"])
    assert shown.value.code == 0
    assert command["summary"].split()[0].lower() in capsys.readouterr().out.lower() or not node.leaf.generated
    if not node.leaf.generated:  # hand-written: arguments of its own, run by test_cli_client.py and the others
        return
    argv = argv_for(command)
    args = build_parser(argv).parse_args(argv)
    assert args.operation is command and callable(args.run)
    path, query, body = request(command, args)
    template = command["op"].split(" ", 1)[1]
    assert "{" not in path and path.count("/") == template.count("/"), path
    assert (body is not None) == command["body"]
    wires = {f["wire"] for f in command["fields"] if f["in"] == "query"}
    assert {name for name, _ in query} <= wires


def test_a_command_per_desktop_goes_to_the_desktop_named() -> None:
    argv = ["mouse", "click", "--desktop", "dsk_1", "3", "4"]
    args = build_parser(argv).parse_args(argv)
    assert request(args.operation, args) == ("/v1/desktops/dsk_1/mouse/click", [], {"x": 3, "y": 4})
    argv = ["processes", "list", "--owner", "user"]
    args = build_parser(argv).parse_args(argv)
    assert not hasattr(args, "desktop") and request(args.operation, args) == ("/v1/processes", [("owner", "user")],
                                                                              None)


def test_options_follow_the_models() -> None:
    """Types, choices, defaults and help come from the models; --json is laid under the options given."""
    argv = ["processes", "run", "--env", "A=1", "--env", "B=x=y", "--timeout-ms", "900", "--", "sh", "-c", "true"]
    args = build_parser(argv).parse_args(argv)
    assert request(args.operation, args)[2] == {"command": "sh", "args": ["-c", "true"], "env": {"A": "1", "B": "x=y"},
                                                "timeoutMs": 900}
    argv = ["actions", "run", "--json", '{"actions": [{"type": "wait", "ms": 1}], "settle": {}}', "--settle",
            '{"quietMs": 50}']
    args = build_parser(argv).parse_args(argv)
    assert request(args.operation, args)[2] == {"actions": [{"type": "wait", "ms": 1}], "settle": {"quietMs": 50}}
    act = ["accessibility", "act", '{"role": "button"}', "click"]
    assert request((args := build_parser(act).parse_args(act)).operation, args)[2] == {
        "element": {"role": "button"}, "action": "click"}
    parser = build_parser(["screenshot", "region", "--help"])
    region = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["screenshot"]
    shot = next(a for a in region._actions if isinstance(a, argparse._SubParsersAction)).choices["region"]
    formats = next(a for a in shot._actions if a.dest == "field_format")
    assert formats.choices == ["png", "jpeg", "webp"] and "default \"png\"" in (formats.help or "")
    with pytest.raises(UsageError, match="--actions"):  # required, in neither the options nor --json
        args = build_parser(["actions", "run"]).parse_args(["actions", "run"])
        request(args.operation, args)
    assert dest({"name": "title-regex"}) == "field_title_regex"


def test_names_read_as_the_api_does() -> None:
    words = {c["op"]: " ".join(c["words"]) for c in spec()["commands"]}
    assert words["GET /v1/desktop/windows"] == "windows list"
    assert words["POST /v1/desktop/windows/{id}/focus"] == "windows focus"
    assert words["POST /v1/processes/run"] == "processes run"
    assert words["GET /v1/desktop/clipboard"] == "clipboard get"
    assert words["POST /v1/processes/config"] == "processes config set"
    assert words["GET /v1/desktop/recordings/{id}"] == "record get"
    assert words["POST /v1/desktop/launch"] == "launch"


@pytest.mark.parametrize("argv", [["--help"], ["status", "--help"], ["mouse", "--help"],
                                  ["status", "--url", "http://127.0.0.1:1"]])
def test_the_cli_starts_without_the_servers_modules(argv: list[str]) -> None:
    """Help and client commands import neither the server (desktop/, Xlib, starlette, aiortc) nor httpx or
    pydantic: a client command costs a Python start and the standard library (docs/cli.md, Start-up)."""
    code = ("import sys, json\nfrom api.cli.main import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit:\n    pass\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, *argv], cwd=REPO, capture_output=True, text=True, timeout=60)
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    heavy = sorted({m.split(".")[0] for m in loaded} & {"desktop", "Xlib", "starlette", "aiortc", "av", "httpx",
                                                        "pydantic", "asyncio", "streaming", "recording"})
    assert heavy == [], heavy
    assert not [m for m in loaded if m.startswith("api.") and not m.startswith("api.cli")]
