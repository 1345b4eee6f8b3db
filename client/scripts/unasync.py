"""Write the sync client from the async one: client.py from async_client.py, _endpoints.py from
_async_endpoints.py, in client/sandbox_desktop_client/ (client/README.md, "Working on the client").

    python client/scripts/unasync.py            # rewrite the sync modules
    python client/scripts/unasync.py --check    # exit 1, with a diff, if one differs from what it would write

As httpcore's scripts/unasync.py: the async module is the source, edited by hand, and its sync twin is the
same text with the asyncio words replaced token by token (`async def` -> `def`, `await ` -> nothing,
`AsyncClient` -> `Client`, `aclose` -> `close`, ...), docstrings included, so the two cannot drift apart.
On top of httpcore's:
- what the sync twin says otherwise is spelled out in REWORDED and ASYNC_ONLY_LINES, and kept that small;
- a continuation line aligned under a bracket moves left as far as the bracket did (`async def f(a,` loses
  six characters, so does the line under it), and a `from ... import` line whose names were renamed is
  sorted again, so the twin passes ruff as it is;
- every rule must still be used, and no `async`, `await` or `Async...` may be left in a twin: a rule no
  text needs any more, or a new asyncio word no rule knows, stops the script instead of passing silently.
tests/unit/client/test_unasync.py runs `--check`.
"""

from __future__ import annotations

import argparse
import difflib
import io
import re
import sys
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "sandbox_desktop_client"
TWINS = {"_async_endpoints.py": "_endpoints.py", "async_client.py": "client.py"}
"""Each hand-written async module of PACKAGE and the sync module generated from it."""
HEADER = "# Generated from {source} by client/scripts/unasync.py: edit that file, then run the script.\n"

REWORDED = {
    "`Client` for asyncio: the same methods, each a coroutine; use it as an async context manager.":
        "A sandbox-desktop server, driven over HTTP (docs/client.md); use it as a context manager.",
    "; `attach` needs no await.": ".",
    "await asyncio.to_thread(f.write, chunk)": "f.write(chunk)",
}
"""Text the sync twin says otherwise, replaced before the token rules."""
ASYNC_ONLY_LINES = frozenset({
    "import asyncio",
    "# The file is written off the event loop: a slow disk must not stall other tasks.",
})
"""Whole lines (stripped) the sync twin leaves out."""
TOKENS = (
    (r"\ban (`?)async ", r"a \1"),  # the article before what loses its `async `...
    (r"\ban `Async(?=[B-DF-HJ-NP-TV-Z])", "a `"),  # ...and before a name that then starts with a consonant
    (r"\bAsync(?=[A-Z])", ""),  # AsyncClient, AsyncDesktopClient, AsyncIterator, httpx.AsyncClient
    (r"\basync (?=(def|with|for)\b)", ""),
    (r"\bawait ", ""),
    (r"\b__a(enter|exit)__\b", r"__\1__"),
    (r"\ba(close|read|iter_bytes|iter_lines|next)\b", r"\1"),  # httpx's and the generators' a-methods
    (r"\b(_?)async_(?=\w)", r"\1"),  # the modules: _async_endpoints, async_client
)
"""(pattern, replacement) for `re.sub`, in this order, on every line."""
LEFT_OVER = re.compile(r"\b(async|await|asyncio)\b|\bAsync[A-Z]")
FROM_IMPORT = re.compile(r"^(\s*from \S+ import )([\w, ]+)$")


class UnasyncError(Exception):
    """The async source has something the rules cannot turn into its sync twin."""


def substitute(text: str, used: set[str] | None = None) -> str:
    """`text` with REWORDED and TOKENS applied; the rules that changed it are added to `used`."""
    for old, new in REWORDED.items():
        if old in text:
            text = text.replace(old, new)
            if used is not None:
                used.add(old)
    for pattern, replacement in TOKENS:
        text, count = re.subn(pattern, replacement, text)
        if count and used is not None:
            used.add(pattern)
    return text


def _import_order(name: str) -> tuple[int, str]:
    """ruff's isort order of the names of a `from` import: constants, classes, then the rest."""
    kind = 0 if len(name) > 1 and name.isupper() else 1 if name[0].isupper() else 2
    return kind, name.lower()


def _resorted(line: str) -> str:
    match = FROM_IMPORT.match(line.rstrip("\n"))
    if match is None:
        return line
    names = sorted((name.strip() for name in match.group(2).split(",")), key=_import_order)
    return match.group(1) + ", ".join(names) + "\n"


@dataclass(frozen=True)
class _Bracket:
    char: str
    row: int
    column: int
    """Where the bracket is in the twin: its line `row` (1-based), at `column`."""
    moved: int
    """How far left it moved: what the continuation lines aligned under it move."""
    aligned: bool
    """Text follows it on its line, so continuation lines align under it; else they hang (indented by 4)."""
    line_moved: int
    """How far left its own line moved: what a hanging continuation moves."""


def unasync(source: str, used: set[str] | None = None) -> str:
    """The sync twin of the async module `source` (without HEADER); the rules used are added to `used`."""
    lines = source.splitlines(keepends=True)
    starting: dict[int, list[tokenize.TokenInfo]] = {}
    in_string: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        starting.setdefault(token.start[0], []).append(token)
        if token.type == tokenize.STRING:
            in_string.update(range(token.start[0] + 1, token.end[0] + 1))
    twin: dict[int, str] = {}
    open_brackets: list[_Bracket] = []
    for row, line in enumerate(lines, start=1):
        moved = 0
        if open_brackets and row not in in_string:
            inner = open_brackets[-1]
            moved = inner.moved if inner.aligned else inner.line_moved
            if inner.aligned and twin[inner.row][inner.column:inner.column + 1] != inner.char:
                raise UnasyncError(f"line {inner.row}: cannot tell where its {inner.char!r} went in the twin")
        if line.strip() in ASYNC_ONLY_LINES:
            if used is not None:
                used.add(line.strip())
            new = ""  # its brackets, if any, are still counted below
        else:
            new = substitute(line, used)
        if moved and new.strip():
            if new[:moved].strip():
                raise UnasyncError(f"line {row}: moving it {moved} left, as its bracket, would cut into its text")
            new = new[moved:]
        if new != line:
            new = _resorted(new)
        twin[row] = new
        tokens = starting.get(row, [])
        for index, token in enumerate(tokens):
            if token.type != tokenize.OP:
                continue
            if token.string in "([{":
                column = token.start[1]
                shift = column + 1 - len(substitute(line[:column + 1])) + moved
                follows = tokens[index + 1] if index + 1 < len(tokens) else None
                aligned = follows is not None and follows.type not in (tokenize.NL, tokenize.NEWLINE,
                                                                        tokenize.COMMENT)
                open_brackets.append(_Bracket(token.string, row, column - shift, shift, aligned, moved))
            elif token.string in ")]}":
                open_brackets.pop()
    text = "".join(twin.values())
    left = LEFT_OVER.search(text)
    if left is not None:
        row = text.count("\n", 0, left.start()) + 1
        raise UnasyncError(f"the twin's line {row} still says {left.group()!r}: add a rule")
    return text


def generate(package: Path = PACKAGE) -> dict[Path, str]:
    """Each sync module's path and the text it should have; UnasyncError when a rule went unused."""
    used: set[str] = set()
    twins = {package / sync: HEADER.format(source=source) + unasync((package / source).read_text(), used)
             for source, sync in TWINS.items()}
    unused = [rule for rule in [*REWORDED, *ASYNC_ONLY_LINES, *(pattern for pattern, _ in TOKENS)]
              if rule not in used]
    if unused:
        raise UnasyncError(f"rules no async module needs any more (remove them): {unused}")
    return twins


def stale(package: Path = PACKAGE) -> list[str]:
    """A diff for each sync module that differs from what `generate` writes; empty when all are current."""
    found = []
    for path, text in generate(package).items():
        current = path.read_text() if path.exists() else ""
        if current != text:
            diff = difflib.unified_diff(current.splitlines(keepends=True), text.splitlines(keepends=True),
                                        f"{path.name} (committed)", f"{path.name} (generated)")
            found.append("".join(diff))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a sync module differs from what would be written")
    args = parser.parse_args(argv)
    try:
        if args.check:
            diffs = stale(PACKAGE)
            for diff in diffs:
                print(diff, end="")
            if diffs:
                print("the sync client is stale: run python client/scripts/unasync.py", file=sys.stderr)
            return 1 if diffs else 0
        for path, text in generate(PACKAGE).items():
            path.write_text(text)
            print(f"wrote {path}")
    except UnasyncError as error:
        print(f"unasync: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
