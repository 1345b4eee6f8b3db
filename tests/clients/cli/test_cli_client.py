"""The client subcommands of `sandbox-desktop`, run as real subprocesses against a live desktop."""

from __future__ import annotations

import concurrent.futures
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import ServerProcess, free_port, wait_for
from tests.support.paths import REPO

DESKTOP = {"displayNum": 333, "width": 800, "height": 600}


def cli(srv: ServerProcess | None, *argv: str, stdin: str | None = None,
        url: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run one subcommand; the server address and token come from the environment, as a user would set them."""
    env = {k: v for k, v in os.environ.items() if k not in ("SANDBOX_DESKTOP_URL", "SANDBOX_DESKTOP_TOKEN")}
    if srv is not None:
        env["SANDBOX_DESKTOP_URL"] = srv.url
        if srv.token:
            env["SANDBOX_DESKTOP_TOKEN"] = srv.token
    if url is not None:
        argv = (*argv, "--url", url)
    return subprocess.run([sys.executable, "-m", "api.cli.main", *argv], cwd=REPO, env=env, input=stdin,
                          capture_output=True, text=True, timeout=30)


def test_status_prints_the_state(srv: ServerProcess) -> None:
    done = cli(srv, "status")
    assert done.returncode == 0, done.stderr
    assert "state: active" in done.stdout
    assert "resolution: 800x600" in done.stdout
    raw = cli(srv, "status", "--json")
    assert raw.returncode == 0 and '"state":"active"' in raw.stdout


def test_screenshot_writes_a_png_of_the_screen(srv: ServerProcess, tmp_path: Path) -> None:
    target = tmp_path / "shot.png"
    done = cli(srv, "screenshot", "-o", str(target))
    assert done.returncode == 0, done.stderr
    data = target.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (800, 600)


def test_input_commands_succeed(srv: ServerProcess) -> None:
    for argv in (("click", "10", "10"), ("click", "20", "20", "--button", "right", "--count", "2"),
                 ("key", "Escape"), ("type", "hi", "--delay-ms", "1"), ("key", "ctrl+shift+a")):
        done = cli(srv, *argv)
        assert done.returncode == 0, (argv, done.stderr)
        assert done.stdout == ""


def test_windows_lists_a_launched_xterm(srv: ServerProcess) -> None:
    with srv.client() as api:
        launched = api.post("/v1/desktop/launch", json={"app": "xterm", "args": ["-T", "cli-term"]})
        assert launched.status_code == 200, launched.text

    def listed() -> str | None:
        table = cli(srv, "windows").stdout
        return table if "cli-term" in table else None

    table = wait_for(listed, "the xterm in the window table")
    header, *rows = table.splitlines()
    assert header.split() == ["ID", "ACTIVE", "GEOMETRY", "TITLE"]
    row = next(r for r in rows if r.endswith("cli-term"))
    cells = row.split()
    assert cells[0].isdigit()
    assert re.fullmatch(r"\d+x\d+\+-?\d+\+-?\d+", cells[-2]), row


def test_clipboard_round_trips(srv: ServerProcess) -> None:
    assert cli(srv, "clipboard", "set", "from argv").returncode == 0
    assert cli(srv, "clipboard", "get").stdout == "from argv"
    assert cli(srv, "clipboard", "set", "-", "--selection", "primary", stdin="from\nstdin").returncode == 0
    assert cli(srv, "clipboard", "get", "--selection", "primary").stdout == "from\nstdin"


def test_record_and_download_an_mp4(srv: ServerProcess, tmp_path: Path) -> None:
    started = cli(srv, "record", "start", "--fps", "10")
    assert started.returncode == 0, started.stderr
    rec_id = started.stdout.strip()
    assert rec_id.startswith("rec_")
    time.sleep(1.0)
    stopped = cli(srv, "record", "stop")
    assert stopped.returncode == 0 and stopped.stdout.startswith(rec_id), stopped.stderr
    assert any(line.split()[0] == rec_id for line in cli(srv, "record", "list").stdout.splitlines())
    target = tmp_path / "rec.mp4"
    done = cli(srv, "record", "download", rec_id, "-o", str(target))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(target)
    assert target.read_bytes()[4:8] == b"ftyp"
    # Read raw bytes: text mode would turn the in-place `\r` redraws into newlines.
    raw = subprocess.run([sys.executable, "-m", "api.cli.main", "record", "download", rec_id,
                          "-o", str(tmp_path / "again.mp4"), "--url", srv.url, f"--token={srv.token or ''}"],
                         cwd=REPO, capture_output=True, timeout=30)
    assert raw.returncode == 0, raw.stderr
    assert re.fullmatch(rb"(\r\[[#.]{30}\] +\d+% [\d.]+/[\d.]+ MB)+\n", raw.stderr), raw.stderr
    size = f"{target.stat().st_size / 1e6:.2f}"
    assert raw.stderr.endswith(f"100% {size}/{size} MB\n".encode())


def test_errors_name_the_problem_and_exit_1(srv: ServerProcess, tmp_path: Path) -> None:
    missing = cli(srv, "record", "download", "rec_9999", "-o", str(tmp_path / "x.mp4"))
    assert missing.returncode == 1
    assert missing.stderr.startswith("error: ") and "HTTP 404" in missing.stderr
    assert missing.stdout == "" and not (tmp_path / "x.mp4").exists()
    bad = cli(srv, "click", "1", "1", "--button", "sideways")
    assert bad.returncode == 1 and "button" in bad.stderr, bad.stderr
    assert re.search(r"\(\w+, HTTP 4\d\d\)$", bad.stderr.strip()), bad.stderr
    chord = cli(srv, "key", "hyper+x")
    assert chord.returncode == 1 and "unknown modifier 'hyper'" in chord.stderr


def test_wrong_token_is_an_error_answer(srv: ServerProcess) -> None:
    if not srv.token:
        pytest.skip("server runs without a token")
    done = cli(srv, "status", "--token", "wrong")
    assert done.returncode == 1 and "HTTP 401" in done.stderr


def test_unreachable_server_exits_2() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = cli(None, "status", url=url)
    assert done.returncode == 2
    assert f"cannot reach the server at {url}" in done.stderr and "sandbox-desktop server" in done.stderr
    assert done.stdout == ""


# One invocation of every client command, its arguments valid (docs/cli.md).
EVERY_COMMAND = (("status",), ("status", "--json"), ("start",), ("stop",), ("screenshot", "-o", "{tmp}/s.png"),
                 ("click", "1", "1"), ("type", "hi"), ("key", "Return"), ("windows",), ("clipboard", "get"),
                 ("clipboard", "set", "x"), ("record", "start"), ("record", "stop"), ("record", "list"),
                 ("record", "download", "rec_1", "-o", "{tmp}/r.mp4"),
                 ("record", "trajectory", "rec_1", "-o", "{tmp}/t.zip"))


def every_command(tmp: Path) -> list[list[str]]:
    return [[arg.replace("{tmp}", str(tmp)) for arg in argv] for argv in EVERY_COMMAND]


def cli_all(srv: ServerProcess | None, argvs: list[list[str]], url: str | None = None
            ) -> list[subprocess.CompletedProcess[str]]:
    """`cli` for each argv, two at a time (each is a Python start: the two cores are the limit)."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda argv: cli(srv, *argv, url=url), argvs))


def test_every_command_exits_non_zero_on_failure(srv: ServerProcess, tmp_path: Path) -> None:
    """An error answer is 1, no answer 2: a script never mistakes a failure for success."""
    unreachable = f"http://127.0.0.1:{free_port()}"
    argvs = every_command(tmp_path)
    refusals = cli_all(srv, [[*argv, "--token", "wrong"] for argv in argvs])
    unanswered = cli_all(None, argvs, url=unreachable)
    for argv, refused, gone in zip(argvs, refusals, unanswered, strict=True):
        assert refused.returncode == 1 and "HTTP 401" in refused.stderr, (argv, refused.stderr)
        assert gone.returncode == 2 and f"cannot reach the server at {unreachable}" in gone.stderr, (argv, gone)
        assert refused.stdout == gone.stdout == "", argv


def test_an_answer_that_is_not_the_apis_exits_1(not_a_sandbox: str, tmp_path: Path) -> None:
    for argv in (["status"], ["windows"], ["screenshot", "-o", str(tmp_path / "s.png")], ["record", "list"]):
        done = cli(None, *argv, url=not_a_sandbox)
        assert done.returncode == 1, (argv, done.stderr)
        assert done.stderr.startswith(f"error: the answer from {not_a_sandbox} is not what sandbox-desktop sends")
        assert "Traceback" not in done.stderr and done.stdout == ""


def test_bad_usage_exits_2_and_bad_input_1(srv: ServerProcess, tmp_path: Path) -> None:
    for url in ("ftp://x", "not a url", "http://[::1", ""):
        for argv in (["status"], ["viewer"]):
            done = cli(None, *argv, url=url)
            assert done.returncode == 2 and "argument --url" in done.stderr, (url, done.stderr)
    garbage = subprocess.run([sys.executable, "-m", "api.cli.main", "status"], cwd=REPO, capture_output=True, text=True,
                             env={**os.environ, "SANDBOX_DESKTOP_URL": "garbage"}, timeout=30)
    assert garbage.returncode == 2 and "SANDBOX_DESKTOP_URL" in garbage.stderr
    for argv in (["click", "1"], ["record"], ["clipboard"], ["key"], ["screenshot"]):
        assert cli(srv, *argv).returncode == 2, argv
    bad_id = cli(srv, "record", "download", "a/b", "-o", str(tmp_path / "r.mp4"))
    assert bad_id.returncode == 1 and bad_id.stderr == "error: not an id: 'a/b'\n", bad_id.stderr
    unwritable = cli(srv, "screenshot", "-o", str(tmp_path / "no-such-dir" / "s.png"))
    assert unwritable.returncode == 1 and unwritable.stderr.startswith("error: "), unwritable.stderr


def test_mcp_without_the_extra_exits_2(tmp_path: Path) -> None:
    """`sandbox-desktop mcp` without the `mcp` package: its message on stderr, nothing on stdout, exit 2."""
    hidden = tmp_path / "mcp"  # shadows an installed `mcp` as if it were not there
    hidden.mkdir()
    (hidden / "__init__.py").write_text("raise ImportError(\"No module named 'mcp'\", name='mcp')\n")
    entry = "import sys; from api.cli.entry import main; sys.argv[0] = 'sandbox-desktop'; sys.exit(main())"
    done = subprocess.run([sys.executable, "-c", entry, "mcp"], cwd=REPO, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(tmp_path)}, timeout=30)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "needs the mcp package" in done.stderr and "pip install 'sandbox-desktop[mcp]'" in done.stderr
    assert done.stdout == ""


def test_viewer_prints_the_inspector_url(srv: ServerProcess) -> None:
    done = cli(srv, "viewer")
    assert done.returncode == 0
    expected = f"{srv.url}/ui/" + (f"#token={srv.token}" if srv.token else "")
    assert done.stdout.strip() == expected
    assert cli(None, "viewer", url="http://h:1/").stdout.strip() == "http://h:1/ui/"
    with httpx.Client() as http:
        assert http.get(expected.split("#")[0]).status_code == 200
