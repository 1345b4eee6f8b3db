"""Client subcommands of `sandbox-desktop` (status, screenshot, click, ...): the sync `Client` from a shell.

Each acts on the default desktop, or on the one `--desktop ID` names; `desktops ...` (api/cli/desktops.py)
creates and manages them (docs/cli.md, docs/desktops.md)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from api.cli import desktops as cli_desktops
from sandbox_desktop_client import ApiError
from sandbox_desktop_client.chords import parse_chord
from sandbox_desktop_client.local_servers import DEFAULT_URL, DESKTOP_ENV, TOKEN_ENV, URL_ENV, resolve_token

if TYPE_CHECKING:
    from sandbox_desktop_client import Client


Handler = Callable[["Client", argparse.Namespace], None]


class UsageError(Exception):
    """Input the CLI rejects before asking the server."""


def out(text: str = "") -> None:
    print(text, flush=True)


def server_url(text: str) -> str:
    """`--url` (and `$SANDBOX_DESKTOP_URL`): an http(s) address, else a usage error (exit 2)."""
    import httpx

    try:
        url = httpx.URL(text)
    except (httpx.InvalidURL, ValueError) as e:
        raise argparse.ArgumentTypeError(f"not a URL: {text!r} ({e})") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise argparse.ArgumentTypeError(f"expected an http:// or https:// address such as {DEFAULT_URL} "
                                         f"(from --url or ${URL_ENV}), got {text!r}")
    return text


# Commands: each takes the open client and the parsed arguments, and writes its result to stdout.

def status(client: Client, args: argparse.Namespace) -> None:
    info = client.status()
    if args.json:
        out(info.to_json().decode())
        return
    out(f"state: {info.state}")
    if info.display:
        out(f"display: {info.display}")
    if info.resolution:
        out(f"resolution: {info.resolution.width}x{info.resolution.height}")
    if info.started_at:
        out(f"started: {info.started_at}")
    if info.windows is not None:
        out(f"windows: {len(info.windows)}")
    if info.last_error:
        out(f"last error: {info.last_error.message} ({info.last_error.code})")
    if info.missing_dependencies:
        out(f"missing: {', '.join(info.missing_dependencies)}")
        if info.install_command:
            out(f"install with: {info.install_command}")


def start(client: Client, args: argparse.Namespace) -> None:
    info = client.start(width=args.width, height=args.height)
    size = f" {info.resolution.width}x{info.resolution.height}" if info.resolution else ""
    out(f"{info.state} {info.display or ''}{size}".rstrip())


def stop(client: Client, args: argparse.Namespace) -> None:
    info = client.stop()
    out(info.state)


def screenshot(client: Client, args: argparse.Namespace) -> None:
    shot = client.screenshot(format=args.format, quality=args.quality, scale=args.scale, show_cursor=args.show_cursor)
    shot.save(args.output)
    out(f"{args.output} {shot.image_width}x{shot.image_height}")


def click(client: Client, args: argparse.Namespace) -> None:
    client.click(args.x, args.y, button=args.button, count=args.count)


def type_text(client: Client, args: argparse.Namespace) -> None:
    client.type_text(read_text(args.text), delay_ms=args.delay_ms)


def key(client: Client, args: argparse.Namespace) -> None:
    name, flags = parse_chord(args.chord)
    client.press(name, **flags)


def windows(client: Client, args: argparse.Namespace) -> None:
    rows = [(w.id, "*" if w.is_active else "", f"{w.width}x{w.height}+{w.x}+{w.y}", w.title)
            for w in client.windows()]
    header = ("ID", "ACTIVE", "GEOMETRY", "TITLE")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        out("  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)) + "  " + row[3])


def read_text(text: str) -> str:
    """The argument itself, or standard input for `-`."""
    return sys.stdin.read() if text == "-" else text


def clipboard_get(client: Client, args: argparse.Namespace) -> None:
    sys.stdout.write(client.clipboard(selection=args.selection))
    sys.stdout.flush()


def clipboard_set(client: Client, args: argparse.Namespace) -> None:
    client.set_clipboard(read_text(args.text), selection=args.selection)


def describe(rec: Any) -> str:
    return f"{rec.id}  {rec.status}  {rec.duration_ms / 1000:.1f}s  {rec.bytes / 1e6:.2f} MB  {rec.started_at}"


def record_start(client: Client, args: argparse.Namespace) -> None:
    out(client.start_recording(fps=args.fps, audio=args.audio).id)


def record_stop(client: Client, args: argparse.Namespace) -> None:
    out(describe(client.stop_recording()))


def record_list(client: Client, args: argparse.Namespace) -> None:
    for rec in client.recordings():
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


def record_download(client: Client, args: argparse.Namespace) -> None:
    bar = ProgressBar()
    try:
        path = client.download_recording(args.id, args.output, progress=bar)
    finally:
        bar.finish()
    out(str(path))


def record_trajectory(client: Client, args: argparse.Namespace) -> None:
    bar = ProgressBar()
    try:
        path = client.download_trajectory(args.id, args.output, image_format=args.image_format,
                                          parquet=args.parquet, moves=args.moves or None, progress=bar)
    finally:
        bar.finish()
    out(str(path))


def viewer_url(url: str, token: str | None, desktop: str | None = None) -> str:
    """The inspector; `#desktop=` selects a desktop in it, as the share links of `desktops token` do."""
    fragment = "&".join(f"{name}={value}" for name, value in (("token", token), ("desktop", desktop)) if value)
    return f"{url.rstrip('/')}/ui/" + (f"#{fragment}" if fragment else "")


def viewer(client: Client, args: argparse.Namespace) -> None:
    """The inspector on `--desktop`: asks the server first, so an id that names no desktop is an error."""
    found = client.desktops.get(args.desktop)
    if found.state == "deleted":
        raise UsageError(f"desktop {found.id} was deleted ({found.ended_reason or 'deleted'})")
    out(viewer_url(args.url, resolve_token(args.token, args.url), found.id))


def add_client_commands(subparsers: argparse._SubParsersAction) -> None:
    """Register the client subcommands on the `sandbox-desktop` parser."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=os.environ.get(URL_ENV) or DEFAULT_URL, type=server_url,
                        help=f"server address (default ${URL_ENV} or {DEFAULT_URL})")
    common.add_argument("--token", default=os.environ.get(TOKEN_ENV) or None,
                        help=f"bearer token (default ${TOKEN_ENV}, else the one a local server announced)")
    target = argparse.ArgumentParser(add_help=False)
    target.add_argument("--desktop", default=os.environ.get(DESKTOP_ENV) or None, metavar="ID",
                        help=f"act on this desktop (default ${DESKTOP_ENV}, else the default desktop)")

    def command(parent: Any, name: str, handler: Handler | None, help: str,
                targeted: bool = True) -> argparse.ArgumentParser:
        parents = [common, target] if targeted else [common]
        parser: argparse.ArgumentParser = parent.add_parser(name, parents=parents, help=help, description=help)
        parser.set_defaults(client_handler=handler)
        return parser

    p = command(subparsers, "status", status, "show the desktop's state")
    p.add_argument("--json", action="store_true", help="print the raw status document")
    p = command(subparsers, "start", start, "start the desktop")
    p.add_argument("--width", type=int)
    p.add_argument("--height", type=int)
    command(subparsers, "stop", stop, "stop the desktop")
    p = command(subparsers, "screenshot", screenshot, "save a screenshot")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE")
    p.add_argument("--format", choices=["png", "jpeg", "webp"], default="png")
    p.add_argument("--scale", type=float)
    p.add_argument("--quality", type=int)
    p.add_argument("--show-cursor", action="store_true")
    p = command(subparsers, "click", click, "click at screen pixel X Y")
    p.add_argument("x", type=int)
    p.add_argument("y", type=int)
    p.add_argument("--button", default="left", help="left, middle, right, back or forward")
    p.add_argument("--count", type=int, default=1)
    p = command(subparsers, "type", type_text, "type text (`-` reads stdin)")
    p.add_argument("text")
    p.add_argument("--delay-ms", type=int, default=0)
    p = command(subparsers, "key", key, "press a key or chord such as ctrl+shift+t")
    p.add_argument("chord")
    command(subparsers, "windows", windows, "list the windows")

    clip = subparsers.add_parser("clipboard", help="read or write the clipboard")
    clip_commands = clip.add_subparsers(dest="clipboard_command", required=True, metavar="ACTION")
    for name, handler, help in (("get", clipboard_get, "print the clipboard"),
                                ("set", clipboard_set, "set the clipboard (`-` reads stdin)")):
        p = command(clip_commands, name, handler, help)
        if name == "set":
            p.add_argument("text")
        p.add_argument("--selection", default="clipboard", choices=["clipboard", "primary"])

    rec = subparsers.add_parser("record", help="record the screen to MP4")
    rec_commands = rec.add_subparsers(dest="record_command", required=True, metavar="ACTION")
    p = command(rec_commands, "start", record_start, "start recording; prints the id")
    p.add_argument("--fps", type=int)
    p.add_argument("--audio", action=argparse.BooleanOptionalAction, default=None,
                   help="record the desktop's sound (default: when it has a sound server)")
    command(rec_commands, "stop", record_stop, "stop recording")
    command(rec_commands, "list", record_list, "list recordings")
    p = command(rec_commands, "download", record_download, "download a recording's MP4")
    p.add_argument("id")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE")
    p = command(rec_commands, "trajectory", record_trajectory,
                "export a recording and its actions as a dataset (zip: steps.jsonl, images, steps.parquet)")
    p.add_argument("id")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE")
    p.add_argument("--image-format", choices=["png", "jpeg"], default=None, help="default png")
    p.add_argument("--parquet", action=argparse.BooleanOptionalAction, default=None,
                   help="add steps.parquet (default: when the server has pyarrow)")
    p.add_argument("--moves", action="store_true", help="keep pointer moves that lead to a click as steps")

    command(subparsers, "viewer", None, "print the inspector's URL (with the token)")
    cli_desktops.add_desktops_commands(
        subparsers, lambda parent, name, handler, help: command(parent, name, handler, help, targeted=False))


def run_client_command(args: argparse.Namespace) -> int:
    """Run a parsed client subcommand: 0 on success, 1 for an error answer or bad input, 2 if unreachable.

    Every failure is a non-zero exit with one `error:` line on stderr, never a traceback (docs/cli.md).
    """
    # Imported here, not with the module: `sandbox-desktop server` builds this parser but never runs a client.
    import httpx
    from pydantic import ValidationError

    from sandbox_desktop_client import Client

    handler: Handler | None = args.client_handler
    desktop: str | None = getattr(args, "desktop", None)  # `desktops ...` commands name theirs as an argument
    if handler is None and desktop is None:  # the default desktop's inspector: nothing to ask the server
        out(viewer_url(args.url, resolve_token(args.token, args.url)))
        return 0
    try:
        with Client(args.url, token=args.token) as client:
            (handler or viewer)(client if desktop is None else client.desktops.attach(desktop), args)
    except ApiError as e:
        print(f"error: {e.detail} ({e.code or 'error'}, HTTP {e.status})", file=sys.stderr)
        return 1
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except httpx.ConnectError:
        print(f"error: cannot reach the server at {args.url}: is `sandbox-desktop server` running?",
              file=sys.stderr)
        return 2
    except (httpx.HTTPError, httpx.InvalidURL) as e:  # a transport failure, or no usable answer at all
        print(f"error: talking to {args.url} failed: {e or type(e).__name__}", file=sys.stderr)
        return 2
    except (ValidationError, json.JSONDecodeError, KeyError) as e:  # KeyError: a header it always sends
        first = f"no {e.args[0]}" if isinstance(e, KeyError) else (str(e).splitlines() or [type(e).__name__])[0]
        print(f"error: the answer from {args.url} is not what sandbox-desktop sends ({first}): "
              "is --url the server's address?", file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:  # a file that cannot be written, an id that is no id
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def is_client_command(args: argparse.Namespace) -> bool:
    return hasattr(args, "client_handler")
