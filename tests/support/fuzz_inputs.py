"""What the fuzzer (tests/support/fuzzing.py) sends: generated cases made safe to send, and the caller mistakes
they are made to carry.

Generated commands are never run as given: each process case gets one of `process_scenario`'s
commands, the harmless `true` or a mistake (a command that does not exist, a file that is not
executable, a directory, a script whose interpreter is missing, a missing or non-directory working
directory), which the server must answer with a 4xx (docs/errors.md). Writes and desktop starts are
kept inside the phase's sandbox, waits short.
"""

from __future__ import annotations

import collections
import json
import math
import re
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from schemathesis.core import NotSet

START = ("POST", "/v1/desktop/start")
CONFIG = ("POST", "/v1/processes/config")
# The stateful phase's desktop. Random starts are pinned to its first display (Xvfb tries the next
# nine, so 480-489 at most), its WebRTC ports and a state directory in the phase's temp dir.
STATEFUL_DISPLAY = 480
STATEFUL_PORTS = (59490, 59499)
# Random starts bigger than this are clamped (8192x8192 is valid, but a 256 MB framebuffer per case).
MAX_START_DIMENSION = 1024
# The harmless command most process cases run; the others carry a mistake (`process_scenario`).
SAFE_COMMAND = "true"
# Waits, delays and durations (ms) above this are clamped so one case cannot take a minute.
MAX_DURATION_MS = 200
_FS_MUTATING = {("PUT", "/v1/fs/file"), ("DELETE", "/v1/fs/entry"), ("POST", "/v1/fs/mkdir"),
                ("POST", "/v1/fs/upload-batch"), ("POST", "/v1/fs/move")}
_DURATION_KEY = re.compile(r"(Ms|_ms|Seconds|timeout|Timeout)$")
_turns: collections.Counter[tuple[str, str]] = collections.Counter()


def mistakes(sandbox: Path) -> dict[str, Path]:
    """The files the mistaken scenarios name, made in `sandbox` (again, if a case deleted them)."""
    made = {"not_executable": sandbox / "mistake-not-executable.txt", "directory": sandbox / "mistake-directory",
            "no_interpreter": sandbox / "mistake-no-interpreter.sh"}
    made["directory"].mkdir(parents=True, exist_ok=True)
    if not made["not_executable"].is_file():
        made["not_executable"].write_text("echo never run\n")
    if not made["no_interpreter"].is_file():
        made["no_interpreter"].write_text("#!/no/such/interpreter\necho never run\n")
        made["no_interpreter"].chmod(0o755)
    return made


def process_scenario(key: tuple[str, str], sandbox: Path) -> tuple[str, str]:
    """The (command, cwd) of the next process case of operation `key`, in turn: each scenario comes up
    every seventh case, so even a short run sends every mistake (a cwd only when the case has one)."""
    made = mistakes(sandbox)
    scenarios = [
        (SAFE_COMMAND, str(sandbox)),
        ("no-such-command-fuzz", str(sandbox)),                   # 422 command_not_found
        (str(made["not_executable"]), str(sandbox)),              # 422 command_not_executable
        (str(made["directory"]), str(sandbox)),                   # 422 command_not_executable
        (str(made["no_interpreter"]), str(sandbox)),              # 422 command_not_executable
        (SAFE_COMMAND, str(sandbox / "no-such-directory")),       # 422 cwd_not_found
        (SAFE_COMMAND, str(made["not_executable"])),              # 422 cwd_not_directory
    ]
    turn = _turns[key]
    _turns[key] += 1
    return scenarios[turn % len(scenarios)]


def _clamp_durations(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (min(v, MAX_DURATION_MS) if _DURATION_KEY.search(k) and isinstance(v, int | float)
                    and not isinstance(v, bool) and math.isfinite(v) else _clamp_durations(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_clamp_durations(v) for v in value]
    return value


def _confine(path: object, root: Path) -> str:
    """A generated path re-rooted under `root`: random names stay random, but never escape."""
    name = str(path).replace("/", "_").replace("\\", "_").strip() or "x"
    if name in (".", ".."):
        name = "x"
    return str(root / name[:200])


def _port_range(text: str) -> str:
    """A valid `LOW-HIGH` moved into the phase's ports (order kept); anything else as it was."""
    low, sep, high = text.partition("-")
    try:
        bounds = (int(low), int(high)) if sep else None
    except ValueError:
        return text
    if bounds is None or not 1024 <= bounds[0] <= bounds[1] <= 65535:
        return text  # refused by the server before anything listens
    first = STATEFUL_PORTS[0]
    span = STATEFUL_PORTS[1] - first + 1
    return f"{first + bounds[0] % span}-{first + max(bounds[0] % span, bounds[1] % span)}"


def _raw_object(raw: bytes | str) -> Any:
    """A raw body as the parsed object the server would read from it (blank reads as `{}`), else unchanged."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if isinstance(value, dict) else raw


def _confine_start(body: Any, state_root: Path) -> Any:
    """A random desktop start kept small, on the phase's display and ports, with its state under `state_root`."""
    if isinstance(body, NotSet):
        body = {}  # no body reads as `{}`, which would start on the default display 99
    elif isinstance(body, bytes | str):
        body = _raw_object(body)  # so does a blank one, and raw JSON may hold an object
    if not isinstance(body, dict):
        return body  # not an object: refused before anything starts
    body = {**body, "displayNum": STATEFUL_DISPLAY}
    for name in ("width", "height"):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            body[name] = min(value, MAX_START_DIMENSION)
    if isinstance(body.get("stateDir"), str):
        body["stateDir"] = _confine(body["stateDir"], state_root)
    if isinstance(body.get("webrtcPortRange"), str):
        body["webrtcPortRange"] = _port_range(body["webrtcPortRange"])
    return body


NOT_GENERATED_HEADERS = ("host", "origin", "content-length", "transfer-encoding", "connection")


def tame(case: Any, sandbox: Path) -> None:
    """Make a generated case safe to send: chosen commands, short waits, writes and desktops inside `sandbox`."""
    key = (case.method.upper(), case.path)
    if isinstance(case.headers, MutableMapping):  # schemathesis keeps them in a CaseInsensitiveDict, not a dict
        # A generated Host or Origin is refused before any route (421, 403: docs/security.md), which
        # is what a browser's page gets and is tested on its own; a generated framing header (a Content-Length
        # of letters, or empty) makes the request one the HTTP parser refuses before the app (its 400). The
        # cases are about the operation.
        for name in [name for name in case.headers if name.lower() in NOT_GENERATED_HEADERS]:
            del case.headers[name]
    if key[0] == "GET" and case.path.endswith("/events") and (case.query is None or isinstance(case.query, dict)):
        case.query = {**(case.query or {}), "follow": False}  # a live stream never ends: the held events only
    if key == START:
        case.body = _confine_start(case.body, sandbox)
        case.media_type = case.media_type or "application/json"  # a body without one is not sent
    if isinstance(case.body, dict):
        if key != CONFIG:  # limits are not waits: the phase restores them before anything uses them
            case.body = _clamp_durations(case.body)
        if case.path in ("/v1/processes", "/v1/processes/run") and case.method.upper() == "POST":
            command, cwd = process_scenario(key, sandbox)
            case.body["command"] = command
            if "cwd" in case.body:
                case.body["cwd"] = cwd
        if key == ("POST", "/v1/fs/move"):
            for name in ("from", "to"):
                if name in case.body:
                    case.body[name] = _confine(case.body[name], sandbox)
    if isinstance(case.query, dict):
        case.query = _clamp_durations(case.query)
        if key in _FS_MUTATING and "path" in case.query:
            case.query["path"] = _confine(case.query["path"], sandbox)
