"""The `sandbox-desktop` command tree: every operation of the table (api/cli/commands.json), the hand-written
commands laid over it (api/cli/client_commands.py, api/cli/desktops.py) and the programs (`server`, `install`,
`ready`, `mcp`), turned into an argparse parser.

Only the branch the command line names is built: `sandbox-desktop status` builds one parser, not a hundred,
and imports nothing of the server (`server`'s arguments import it when `server` is asked for). A node that is
both a command and a group (`windows`, `screenshot`) runs the command unless the next word is one of its
actions (`windows focus ID`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from api.cli import calls
from api.cli.operation_args import Command, add_arguments, add_connection, by_op, spec

Words = tuple[str, ...]
Render = Callable[[calls.Answer, argparse.Namespace], None]
Action = Callable[[calls.Api, argparse.Namespace], None]


@dataclass(frozen=True)
class Leaf:
    """A command: its one-line help and what builds its arguments (and sets `run` on the parser's defaults)."""

    help: str
    build: Callable[[argparse.ArgumentParser], None]
    op: str | None = None
    """The operation it runs (`METHOD path`), for the test that every operation has a command."""
    description: str | None = None
    generated: bool = False
    """Derived from the table alone (no hand-written arguments or output)."""


@dataclass
class Node:
    leaf: Leaf | None = None
    children: dict[str, Node] = field(default_factory=dict)
    help: str | None = None
    description: str | None = None

    def summary(self) -> str:
        actions = ", ".join(self.children)
        text = self.help or actions if self.leaf is None else self.leaf.help
        text = text[:1].upper() + text[1:]  # the table's summaries are sentences; hand-written ones too, then
        return f"{text} (also: {actions})" if self.leaf is not None and actions else text


def operation_leaf(command: Command) -> Leaf:
    """The generated command of one operation: its answer written as it comes (calls.show)."""
    def build(parser: argparse.ArgumentParser) -> None:
        add_arguments(parser, command)
        parser.set_defaults(run=lambda args: calls.run(args, calls.run_operation), operation=command)

    return Leaf(command["summary"], build, command["op"], f"{command['summary']}  ({command['op']})", generated=True)


def quiet(answer: calls.Answer, args: argparse.Namespace) -> None:
    """Print nothing; the answer must still be the API's."""
    if answer.status != 204:
        answer.json()


def entry(op: str, render: Render = quiet, *, help: str | None = None, output: str = "none",
          tweaks: dict[str, dict[str, Any]] | None = None, prepare: Callable[[argparse.Namespace], None] | None = None,
          extra: Callable[[argparse.ArgumentParser], None] | None = None) -> Leaf:
    """A hand-written command over an operation: the generated arguments (`tweaks` renames or changes some, `extra`
    adds), `prepare` adjusting the parsed ones, and `render` writing the answer its own way."""
    command = by_op()[op]

    def action(api: calls.Api, args: argparse.Namespace) -> None:
        if prepare is not None:
            prepare(args)
        render(calls.call(api, command, args), args)

    def build(parser: argparse.ArgumentParser) -> None:
        add_arguments(parser, command, output, tweaks)
        if extra is not None:
            extra(parser)
        parser.set_defaults(run=lambda args: calls.run(args, action), operation=command)

    return Leaf(help or command["summary"], build, op, help or command["summary"])


def own(help: str, arguments: Callable[[argparse.ArgumentParser], None], action: Action, *, op: str | None = None,
        targeted: bool = True) -> Leaf:
    """A hand-written command with arguments of its own (what the table cannot say, such as `?tag=` filters)."""
    def build(parser: argparse.ArgumentParser) -> None:
        arguments(parser)
        add_connection(parser, targeted)
        parser.set_defaults(run=lambda args: calls.run(args, action))

    return Leaf(help, build, op, help)


def place(root: Node, words: Words, leaf: Leaf | None = None, help: str | None = None,
          description: str | None = None) -> None:
    """Put a command (or a group's help) at `words`; a hand-written command placed first is not replaced."""
    node = root
    for word in words:
        node = node.children.setdefault(word, Node())
    if leaf is not None and node.leaf is None:
        node.leaf = leaf
    node.help = node.help or help
    node.description = node.description or description


def build_tree(leaves: dict[Words, Leaf], groups: dict[Words, tuple[str, str | None]]) -> Node:
    """The hand-written commands and programs in their order, then every operation of the table not taken yet."""
    root = Node()
    for words, leaf in leaves.items():
        place(root, words, leaf)
    for words, (help, description) in groups.items():
        place(root, words, help=help, description=description)
    for command in spec()["commands"]:
        place(root, tuple(command["words"]), operation_leaf(command))
    return root


def populate(parser: argparse.ArgumentParser, node: Node, argv: list[str] | None, depth: int = 0) -> None:
    """Add `node`'s arguments or subcommands to `parser`: those `argv` names only, every one when it is None."""
    chosen = argv[0] if argv else None
    if node.children and (argv is None or node.leaf is None or chosen in node.children):
        commands = parser.add_subparsers(dest="command" if depth == 0 else f"action_{depth}", required=True,
                                         metavar="COMMAND" if depth == 0 else "ACTION")
        for name, child in node.children.items():
            description = child.description or (child.leaf.description if child.leaf else None) or child.summary()
            sub = commands.add_parser(name, help=child.summary().replace("%", "%%"), description=description)
            if argv is None or name == chosen:
                populate(sub, child, None if argv is None else argv[1:], depth + 1)
    elif node.leaf is not None:
        node.leaf.build(parser)
        parser.set_defaults(parser=parser)
        if node.children:
            parser.epilog = f"Its actions: {', '.join(node.children)} (`{parser.prog} ACTION --help`)."


def parser_for(root: Node, argv: Sequence[str] | None, **options: Any) -> argparse.ArgumentParser:
    """The parser for `argv` (every command's when None: slower, for tests and tools that walk it)."""
    parser = argparse.ArgumentParser(**options)
    populate(parser, root, None if argv is None else list(argv))
    return parser


def find(root: Node, words: Words) -> Node | None:
    node: Node | None = root
    for word in words:
        node = node.children.get(word) if node is not None else None
    return node
