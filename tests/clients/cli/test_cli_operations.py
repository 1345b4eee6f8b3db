"""Commands derived from the operation table, run as real subprocesses against a live desktop: launch and wait
for a window, find and act on an element, processes, files, windows, the actions batch, binary answers and
problem documents (docs/cli.md)."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import pty
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ServerProcess, free_port, wait_for
from tests.support.paths import REPO

DESKTOP = {"displayNum": 393, "width": 800, "height": 600}


def cli(srv: ServerProcess | None, *argv: str, stdin: bytes | None = None, url: str | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    """One command, the server's address and token from the environment as a user sets them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_DESKTOP_")}
    if srv is not None:
        env["SANDBOX_DESKTOP_URL"] = srv.url
        env["SANDBOX_DESKTOP_TOKEN"] = srv.token or ""
    if url is not None:
        env["SANDBOX_DESKTOP_URL"] = url
    return subprocess.run([sys.executable, "-m", "api.cli", *argv], cwd=REPO, env=env, input=stdin,
                          capture_output=True, timeout=timeout)


def ok(done: subprocess.CompletedProcess[bytes]) -> bytes:
    assert done.returncode == 0, (done.args[3:], done.returncode, done.stderr.decode())
    assert done.stderr == b"", done.stderr.decode()
    return done.stdout


def answer(srv: ServerProcess, *argv: str, stdin: bytes | None = None) -> Any:
    """A command's JSON answer."""
    return json.loads(ok(cli(srv, *argv, stdin=stdin)))


def output(srv: ServerProcess, process_id: str) -> str:
    """A process's standard output so far (its log entries are base64, in chunks as they were written)."""
    entries = answer(srv, "processes", "logs", process_id, "--stream", "stdout")["entries"]
    return b"".join(base64.b64decode(e["data"]) for e in entries).decode()


def failed(done: subprocess.CompletedProcess[bytes], status: int = 1) -> str:
    assert done.returncode == status, (done.args[3:], done.returncode, done.stderr.decode())
    assert done.stdout == b"" and "Traceback" not in done.stderr.decode(), done
    return done.stderr.decode()


def test_launch_waits_for_a_window_that_the_windows_commands_drive(srv: ServerProcess, tmp_path: Path) -> None:
    launched = answer(srv, "launch", "--wait", "--wait-timeout-ms", "15000", "xterm", "-T", "cli-ops-term")
    assert launched["processId"] and launched["windowId"], launched
    window = launched["windowId"]
    waited = answer(srv, "wait", "--timeout-ms", "10000", "--window", '{"titleRegex": "^cli-ops-term$"}')
    assert waited["matched"] is True and waited["condition"] == "window", waited
    listed = answer(srv, "windows", "list", "--title-regex", "^cli-ops-term$")["windows"]
    assert [w["id"] for w in listed] == [window], listed
    moved = answer(srv, "windows", "move", window, "40", "50")
    assert (moved["x"], moved["y"]) == (40, 50), moved
    assert answer(srv, "windows", "focus", window)["id"] == window
    shot = tmp_path / "window.png"
    assert ok(cli(srv, "windows", "screenshot", window, "-o", str(shot))).decode() == f"{shot}\n"
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    closed = answer(srv, "windows", "close", window, "--timeout-ms", "2000")
    assert closed, closed
    gone = cli(srv, "wait", "--timeout-ms", "300", "--window", '{"titleRegex": "^cli-ops-term$"}')
    assert gone.returncode == 1 and json.loads(gone.stdout)["matched"] is False, gone
    assert gone.stderr.decode().startswith("error: the condition did not hold"), gone.stderr


def test_processes_run_start_and_logs(srv: ServerProcess) -> None:
    ran = answer(srv, "processes", "run", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert (ran["exitCode"], ran["stdout"], ran["stderr"]) == (3, "out\n", "err\n"), ran
    env = answer(srv, "processes", "run", "--env", "GREETING=a=b", "sh", "-c", "echo $GREETING")
    assert env["stdout"] == "a=b\n", env
    started = answer(srv, "processes", "start", "--interactive", "cat")
    pid = started["id"]
    assert answer(srv, "processes", "input", pid, "hello\n", "--encoding", "text")
    assert wait_for(lambda: output(srv, pid) == "hello\n", "cat's echo")
    assert answer(srv, "processes", "kill", pid, "--wait-ms", "3000")["status"] == "exited"
    assert ok(cli(srv, "processes", "delete", pid)) == b""
    failed(cli(srv, "processes", "get", pid))


def test_files_round_trip_through_stdin_files_and_pipes(srv: ServerProcess, tmp_path: Path) -> None:
    folder = tmp_path / "remote"
    data = bytes(range(256)) * 64
    written = answer(srv, "fs", "write", str(folder / "a.bin"), stdin=data)
    assert written["bytesWritten"] == len(data), written
    local = tmp_path / "local.bin"
    local.write_bytes(data[:100])
    assert answer(srv, "fs", "write", str(folder / "b.bin"), "-i", str(local))["bytesWritten"] == 100
    assert ok(cli(srv, "fs", "read", str(folder / "a.bin"))) == data  # standard output is a pipe here
    copy = tmp_path / "copy.bin"
    assert ok(cli(srv, "fs", "read", str(folder / "a.bin"), "-o", str(copy))).decode() == f"{copy}\n"
    assert copy.read_bytes() == data
    assert answer(srv, "fs", "stat", str(folder / "b.bin"))["size"] == 100
    names = {e["name"] for e in answer(srv, "fs", "list", "--path", str(folder))}
    assert names == {"a.bin", "b.bin"}, names
    answer(srv, "fs", "move", str(folder / "b.bin"), str(folder / "c.bin"))
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        entry = tarfile.TarInfo("inside/t.txt")
        entry.size = 2
        tar.addfile(entry, io.BytesIO(b"hi"))
    unpacked = answer(srv, "fs", "upload-batch", "--path", str(folder), stdin=archive.getvalue())
    assert (folder / "inside" / "t.txt").read_bytes() == b"hi", unpacked
    answer(srv, "fs", "delete", str(folder), "--recursive")
    missing = failed(cli(srv, "fs", "read", str(folder / "a.bin"), "-o", str(tmp_path / "none.bin")))
    assert "HTTP 404" in missing and not (tmp_path / "none.bin").exists(), missing


def test_an_actions_batch_from_json_a_file_and_stdin(srv: ServerProcess, tmp_path: Path) -> None:
    batch = {"actions": [{"type": "move", "x": 30, "y": 40}, {"type": "click", "x": 31, "y": 41}]}
    ran = answer(srv, "actions", "run", "--json", json.dumps(batch))
    assert [r["type"] for r in ran["results"]] == ["move", "click"] and "error" not in ran, ran
    (tmp_path / "batch.json").write_text(json.dumps(batch))
    shot = answer(srv, "actions", "run", "--json", f"@{tmp_path / 'batch.json'}", "--screenshot", '{"scale": 0.5}')
    assert shot["screenshot"]["frame"]["imageWidth"] == 400, {k: v for k, v in shot.items() if k != "screenshot"}
    piped = answer(srv, "actions", "run", "--json", "@-", stdin=json.dumps(batch).encode())
    assert len(piped["results"]) == 2
    log = answer(srv, "actions", "log")["entries"]
    assert sum(1 for e in log if e["kind"] == "click" and (e.get("x"), e.get("y")) == (31, 41)) >= 3, log[-4:]
    assert answer(srv, "mouse", "position")["x"] == 31


def test_screenshots_and_events(srv: ServerProcess, tmp_path: Path) -> None:
    region = tmp_path / "region.png"
    ok(cli(srv, "screenshot", "region", "10", "20", "40", "30", "-o", str(region)))
    data = region.read_bytes()
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (40, 30)
    jpeg = ok(cli(srv, "screenshot", "region", "0", "0", "8", "8", "--format", "jpeg", "-o", "-"))
    assert jpeg.startswith(b"\xff\xd8")
    ok(cli(srv, "clipboard", "set", "event please"))
    lines = ok(cli(srv, "events", "--no-follow", "--types", "clipboard.")).decode().splitlines()
    assert lines and all(json.loads(line)["type"].startswith("clipboard.") for line in lines), lines


@pytest.mark.skipif(not shutil.which("zenity"), reason="needs zenity (scripts/setup.sh test installs it)")
def test_find_and_act_fill_a_gtk_form(srv: ServerProcess) -> None:
    started = answer(srv, "processes", "start", "zenity", "--forms", "--title=CLI form", "--add-entry=City")
    entry = '{"role": "textbox", "name": "City"}'
    assert answer(srv, "wait", "--timeout-ms", "30000", "--element", entry)["matched"] is True
    found = answer(srv, "accessibility", "find", "--role", "textbox", "--name", "City")["elements"]
    assert len(found) == 1 and "setValue" in found[0]["actions"], found
    answer(srv, "accessibility", "act", found[0]["id"], "setValue", "--value", "London")
    assert answer(srv, "accessibility", "act", '{"role": "button", "name": "OK"}', "click")["through"] == "pointer"
    wait_for(lambda: answer(srv, "processes", "get", started["id"])["status"] == "exited", "zenity to exit")
    assert output(srv, started["id"]) == "London\n"


def test_problems_and_usage_errors_exit_non_zero(srv: ServerProcess, not_a_sandbox: str) -> None:
    assert failed(cli(srv, "processes", "get", "nope")) == "error: not found: process nope (not_found, HTTP 404)\n"
    several = failed(cli(srv, "mouse", "drag", "--json", '{"button": "left"}', "1", "2", "3", "4", "--steps", "-1",
                         "--duration-ms", "-5"))
    assert "HTTP 4" in several and "\n  body.steps: " in several and "\n  body.durationMs: " in several, several
    for argv in (["actions", "run"], ["actions", "run", "--json", "[1]"], ["actions", "run", "--json", "@/no/such"],
                 ["mouse", "click", "1"], ["approvals", "decide", "a1", "maybe"], ["processes", "run", "--env", "x"]):
        assert "usage: sandbox-desktop" in failed(cli(srv, *argv), 2), argv
    unreachable = f"http://127.0.0.1:{free_port()}"
    assert "cannot reach the server" in failed(cli(None, "windows", "list", url=unreachable), 2)
    for argv in (["info"], ["windows", "list"], ["fs", "stat", "/"]):
        other = failed(cli(None, *argv, url=not_a_sandbox))
        assert other.startswith(f"error: the answer from {not_a_sandbox} is not what sandbox-desktop sends"), other


def on_a_terminal(srv: ServerProcess, *argv: str) -> tuple[subprocess.CompletedProcess[bytes], bytes]:
    """A command whose standard output is a terminal, and what the terminal got."""
    leader, follower = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "api.cli", *argv, "--url", srv.url, f"--token={srv.token or ''}"],
                              cwd=REPO, stdout=follower, stderr=subprocess.PIPE, timeout=60)
        os.close(follower)
        shown = b""
        with contextlib.suppress(OSError):  # EIO once everything written is read
            while chunk := os.read(leader, 4096):
                shown += chunk
    finally:
        os.close(leader)
    return done, shown


def test_a_binary_answer_is_not_written_to_a_terminal(srv: ServerProcess, tmp_path: Path) -> None:
    image, shown = on_a_terminal(srv, "screenshot", "region", "0", "0", "4", "4")
    assert image.returncode == 2 and b"write it with -o FILE, or pipe it" in image.stderr and not shown, image.stderr
    (tmp_path / "text.txt").write_text("plain words\n")
    (tmp_path / "zeros.bin").write_bytes(b"\0" * 10)
    text, shown = on_a_terminal(srv, "fs", "read", str(tmp_path / "text.txt"))
    assert text.returncode == 0 and shown.replace(b"\r\n", b"\n") == b"plain words\n", (text.stderr, shown)
    raw, shown = on_a_terminal(srv, "fs", "read", str(tmp_path / "zeros.bin"))
    assert raw.returncode == 1 and b"the answer is binary" in raw.stderr and not shown, raw.stderr
