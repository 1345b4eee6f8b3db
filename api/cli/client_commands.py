"""The hand-written client commands of `sandbox-desktop` (status, screenshot, click, ...), laid over the commands
derived from the operation table (api/cli/tree.py): each is its operation's generated command with shorter
names or a plainer output, kept because it reads better in a shell than indented JSON.

Each acts on the default desktop, or on the one `--desktop ID` names; `desktops ...` (api/cli/desktops.py)
creates and manages them (docs/cli.md, docs/desktops.md).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from pathlib import Path
from typing import Any

from api.cli import calls
from api.cli.calls import Answer, Api, Failure
from api.cli.operation_args import path_id
from api.cli.tree import Leaf, Words, entry, own
from sandbox_desktop_client.chords import parse_chord
from sandbox_desktop_client.local_servers import resolve_token


def out(text: str = "") -> None:
    print(text, flush=True)


def read_text(text: str) -> str:
    """The argument itself, or standard input for `-`."""
    return sys.stdin.read() if text == "-" else text


def png_file(name: str) -> str:
    """`--image FILE`: the file's bytes, base64 as the API takes them."""
    try:
        return base64.b64encode(Path(name).read_bytes()).decode("ascii")
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot read {name}: {e.strerror or e}") from None


def status(answer: Answer, args: argparse.Namespace) -> None:
    info = answer.json()
    if args.json:
        out(json.dumps(info, separators=(",", ":"), ensure_ascii=False))
        return
    size = info.get("resolution") or {}
    error = info.get("lastError") or {}
    for label, value in (("state", info.get("state")), ("display", info.get("display")),
                         ("resolution", size and f"{size.get('width')}x{size.get('height')}"),
                         ("started", info.get("startedAt")),
                         ("windows", len(info["windows"]) if info.get("windows") is not None else None),
                         ("last error", error and f"{error.get('message')} ({error.get('code')})"),
                         ("missing", ", ".join(info.get("missingDependencies") or ())),
                         ("install with", info.get("missingDependencies") and info.get("installCommand"))):
        if value or (label in ("state", "windows") and value is not None):
            out(f"{label}: {value}")


def raw_switch(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the raw status document")


def started(answer: Answer, args: argparse.Namespace) -> None:
    info = answer.json()
    size = info.get("resolution")
    out(" ".join([info["state"], info.get("display") or "", f"{size['width']}x{size['height']}" if size else ""])
        .rstrip())


def stopped(answer: Answer, args: argparse.Namespace) -> None:
    out(answer.json()["state"])


def screenshot(answer: Answer, args: argparse.Namespace) -> None:
    size = f"{answer.header('x-image-width')}x{answer.header('x-image-height')}"  # no file unless they are there
    with calls.output(args.output) as f:
        answer.copy(f)
    out(f"{args.output} {size}")


def windows(answer: Answer, args: argparse.Namespace) -> None:
    rows = [(str(w["id"]), "*" if w.get("isActive") else "", f"{w['width']}x{w['height']}+{w['x']}+{w['y']}",
             w.get("title") or "") for w in answer.json()["windows"]]
    header = ("ID", "ACTIVE", "GEOMETRY", "TITLE")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    out("\n".join("  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)) + "  " + row[3]
                  for row in [header, *rows]))


def clipboard_get(answer: Answer, args: argparse.Namespace) -> None:
    """The text exactly (no newline added); an image (`--format image`) to -o FILE or a pipe."""
    if answer.media.startswith("image/"):
        calls.save(answer, args.output)
        return
    sys.stdout.write(answer.json()["text"])
    sys.stdout.flush()


def describe(rec: dict[str, Any]) -> str:
    return (f"{rec['id']}  {rec['status']}  {rec['durationMs'] / 1000:.1f}s  {rec['bytes'] / 1e6:.2f} MB  "
            f"{rec['startedAt']}")


def recordings(answer: Answer, args: argparse.Namespace) -> None:
    for rec in answer.json()["recordings"]:
        out(describe(rec))


class ProgressBar:
    """A one-line bar on stderr (percent and MB), redrawn in place as chunks arrive."""

    def __init__(self, width: int = 30) -> None:
        self.width = width
        self.drawn = False

    def __call__(self, done: int, total: int | None) -> None:
        if total:
            filled = self.width * done // total
            bar = f"[{'#' * filled}{'.' * (self.width - filled)}] {100 * done // total:3d}% "
            size = f"{done / 1e6:.2f}/{total / 1e6:.2f} MB"
        else:
            bar, size = "", f"{done / 1e6:.2f} MB"
        sys.stderr.write(f"\r{bar}{size}")
        sys.stderr.flush()
        self.drawn = True

    def finish(self) -> None:
        if self.drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()


def download(answer: Answer, args: argparse.Namespace) -> None:
    """A recording's MP4 or dataset zip to -o FILE, with a progress bar on stderr; prints the file."""
    if answer.media.startswith("text/"):
        raise calls.not_the_api(answer.url, f"Content-Type {answer.media}")
    bar = ProgressBar()
    try:
        calls.save(answer, args.output, bar)
    finally:
        bar.finish()


def chord(args: argparse.Namespace) -> None:
    """`ctrl+shift+t` → key `t` with the ctrl and shift modifiers (an unknown modifier is an error, exit 1)."""
    args.field_key, flags = parse_chord(args.field_key)
    if flags:
        args.field_modifiers = {**(args.field_modifiers or {}), **flags}


def waited(answer: Answer, args: argparse.Namespace) -> None:
    """The answer as JSON; exit 1 when the condition did not hold in time, so `wait ... && next` reads right."""
    result = answer.json()
    calls.write_json(result, args.output)
    if not result.get("matched"):
        raise Failure(f"the condition did not hold in {result.get('elapsedMs', '?')} ms (matched: false)")


def viewer_url(url: str, token: str | None, desktop: str | None = None) -> str:
    """The inspector; `#desktop=` selects a desktop in it, as the share links of `desktops token` do."""
    fragment = "&".join(f"{name}={value}" for name, value in (("token", token), ("desktop", desktop)) if value)
    return f"{url.rstrip('/')}/ui/" + (f"#{fragment}" if fragment else "")


def viewer(api: Api, args: argparse.Namespace) -> None:
    """The inspector on `--desktop`: asks the server first, so an id that names no desktop is an error."""
    if args.desktop is None:  # the default desktop's: nothing to ask the server
        out(viewer_url(args.url, api.token))
        return
    found = api.send("GET", f"/v1/desktops/{path_id(args.desktop)}").json()
    if found.get("state") == "deleted":
        raise Failure(f"desktop {found['id']} was deleted ({found.get('endedReason') or 'deleted'})")
    out(viewer_url(args.url, resolve_token(args.token, args.url), found["id"]))


COMMANDS: dict[Words, Leaf] = {
    ("status",): entry("GET /v1/desktop/status", status, help="show the desktop's state", extra=raw_switch),
    ("start",): entry("POST /v1/desktop/start", started, help="start the desktop; prints state, display and size"),
    ("stop",): entry("POST /v1/desktop/stop", stopped, help="stop the desktop"),
    ("screenshot",): entry("GET /v1/desktop/screenshot", screenshot, output="required",
                           help="save a screenshot; prints the file and the image size"),
    ("click",): entry("POST /v1/desktop/mouse/click", help="click at screen pixel X Y", tweaks={
        "button": {"choices": None, "help": "left, middle, right, back or forward (default left)"},
        "clickCount": {"flags": ["--count"]}}),
    ("type",): entry("POST /v1/desktop/keyboard/type", help="type text (`-` reads stdin)", tweaks={
        "text": {"type": read_text}, "delayMs": {"default": 0}}),
    ("key",): entry("POST /v1/desktop/keyboard/press", prepare=chord, help="press a key or chord such as ctrl+shift+t",
                    tweaks={"key": {"metavar": "CHORD"}}),
    ("windows",): entry("GET /v1/desktop/windows", windows, help="list the windows"),
    ("clipboard", "get"): entry("GET /v1/desktop/clipboard", clipboard_get, output="optional",
                                help="print the clipboard (`--format image`: its PNG)"),
    ("clipboard", "set"): entry("POST /v1/desktop/clipboard", help="set the clipboard (`-` reads stdin)", tweaks={
        "text": {"positional": True, "nargs": "?", "type": read_text, "metavar": "TEXT"},
        "image": {"type": png_file, "metavar": "PNG_FILE", "help": "a PNG file offered next to the text"}}),
    ("record", "start"): entry("POST /v1/desktop/recording/start", lambda a, _: out(a.json()["id"]),
                               help="start recording; prints the id"),
    ("record", "stop"): entry("POST /v1/desktop/recording/stop", lambda a, _: out(describe(a.json())),
                              help="stop recording"),
    ("record", "list"): entry("GET /v1/desktop/recordings", recordings, help="list recordings"),
    ("record", "download"): entry("GET /v1/desktop/recordings/{id}/download", download, output="required",
                                  help="download a recording's MP4"),
    ("record", "trajectory"): entry("GET /v1/desktop/recordings/{id}/trajectory", download, output="required",
                                    help="export a recording and its actions as a dataset (zip: steps.jsonl, "
                                         "images, steps.parquet)"),
    ("wait",): entry("POST /v1/desktop/wait", waited, output="optional"),
    ("viewer",): own("print the inspector's URL (with the token)", lambda p: None, viewer),
}
"""Hand-written commands by their words; `--help` lists them in this order."""

GROUPS: dict[Words, tuple[str, str | None]] = {
    ("clipboard",): ("read or write the clipboard", None),
    ("record",): ("record the screen to MP4, list, download and export recordings", None),
}
