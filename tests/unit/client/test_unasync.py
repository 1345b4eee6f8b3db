"""client/scripts/unasync.py: the sync client is the async one with the asyncio words replaced, and the
committed sync modules are what the script writes (`--check`), so a change to one client reaches both."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.paths import REPO

SCRIPT = REPO / "client" / "scripts" / "unasync.py"


def load_script() -> ModuleType:
    # Loaded from its file: client/scripts is not a package. Registered first, as dataclasses look it up.
    spec = importlib.util.spec_from_file_location("unasync", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


unasync = load_script()


def copy_of_the_package(tmp_path: Path) -> Path:
    """The async modules and their committed twins, in a folder of their own to change."""
    for source, sync in unasync.TWINS.items():
        for name in (source, sync):
            shutil.copy(unasync.PACKAGE / name, tmp_path / name)
    return tmp_path


def test_the_committed_sync_modules_are_what_the_script_writes() -> None:
    ran = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_a_change_to_an_async_module_makes_its_twin_stale_until_the_script_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    package = copy_of_the_package(tmp_path)
    monkeypatch.setattr(unasync, "PACKAGE", package)
    source = package / "async_client.py"
    closing = "Close the connection pool (leaving an `async with` block does)."
    assert source.read_text().count(closing) == 1
    source.write_text(source.read_text().replace(closing, "Close it (leaving an `async with` block does)."))

    assert unasync.main(["--check"]) == 1
    diff = capsys.readouterr().out
    assert "client.py (committed)" in diff
    assert '+        """Close it (leaving a `with` block does)."""' in diff
    assert unasync.main([]) == 0
    assert unasync.main(["--check"]) == 0
    assert "Close it (leaving a `with` block does)." in (package / "client.py").read_text()


def test_continuation_lines_move_with_their_bracket_and_hanging_ones_stay() -> None:
    source = '''import asyncio
from collections.abc import AsyncIterator, Iterable


class AsyncLines:
    """Use it as an async context manager; it is an `AsyncLines` (async_client.py)."""

    async def lines(self, a: int,
                    b: int) -> AsyncIterator[str]:
        async with self._http.stream(a,
                                     b) as response:
            await response.aread()
            async for line in response.aiter_lines():
                yield line

    async def sent(self) -> int:
        return await self.send(b.start(
            width=1))
'''
    assert unasync.unasync(source) == '''from collections.abc import Iterable, Iterator


class Lines:
    """Use it as a context manager; it is a `Lines` (client.py)."""

    def lines(self, a: int,
              b: int) -> Iterator[str]:
        with self._http.stream(a,
                               b) as response:
            response.read()
            for line in response.iter_lines():
                yield line

    def sent(self) -> int:
        return self.send(b.start(
            width=1))
'''


def test_an_asyncio_word_no_rule_knows_stops_the_script() -> None:
    with pytest.raises(unasync.UnasyncError, match="asyncio"):
        unasync.unasync("loop = asyncio.get_running_loop()\n")


def test_a_rule_no_async_module_needs_any_more_stops_the_script(tmp_path: Path) -> None:
    package = copy_of_the_package(tmp_path)
    source = package / "_async_endpoints.py"
    text = source.read_text()
    comment = [line for line in text.splitlines(keepends=True) if line.strip() in unasync.ASYNC_ONLY_LINES
               and line.strip().startswith("#")]
    assert len(comment) == 1
    source.write_text(text.replace(comment[0], ""))
    with pytest.raises(unasync.UnasyncError, match="no async module needs any more"):
        unasync.generate(package)
