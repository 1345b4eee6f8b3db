"""What the guest routes do inside one desktop: its commands run through its own process registry in its
sandbox (its uid, namespaces and cgroup) with its session's environment, from its HOME; its files are reached
through its own file place. Nothing here runs on the machine as the server's user unless the desktop itself
has no sandbox (`--isolation off`), exactly as its `/processes` and `/fs` APIs behave (docs/security.md)."""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from desktop.accessibility.browsers import with_accessibility
from desktop.files.filesystem import MACHINE, Files, InSandbox
from desktop.lifecycle.home import ACCESSIBILITY_MARK
from desktop.lifecycle.runtime import Desktop
from desktop.processes import ManagedProcess
from desktop.processes.runner import RunResult
from desktop.x11.session import Session

SHELL = "/bin/sh"
"""What upstream's `subprocess.run(..., shell=True)` runs a command with."""


class BadCommand(ValueError):
    """A `command` that is neither a string nor a list of strings."""


@dataclass(frozen=True)
class Ran:
    """A finished command as upstream's `subprocess.run(text=True)` gives it."""

    stdout: str
    stderr: str
    returncode: int
    timed_out: bool


def ran(result: RunResult) -> Ran:
    # subprocess reports death by a signal as a negative return code.
    code = result.exit_code if result.exit_code is not None else -(result.exit_signal or 0)
    return Ran(result.stdout.decode("utf-8", errors="replace"), result.stderr.decode("utf-8", errors="replace"),
               code, result.timed_out)


class InDesktop:
    """One desktop as the guest API acts on it."""

    def __init__(self, desktop: Desktop) -> None:
        self.desktop = desktop

    def session(self) -> Session:
        """The running desktop, or the reason there is none (a DomainError the guest app answers)."""
        return self.desktop.session()

    @property
    def home(self) -> str:
        return self.session().home

    def env(self) -> dict[str, str]:
        return dict(self.session().env)

    def expand(self, path: str) -> str:
        """`os.path.expandvars(os.path.expanduser(path))` as upstream does it, but with the desktop's HOME and
        environment: the guest of a VM runs as the VM's user."""
        env = self.env()
        home = self.home
        if path == "~" or path.startswith("~/"):
            path = home + path[1:]

        def variable(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(2)
            return env.get(name, match.group(0))

        return re.sub(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))", variable, path)

    def argv(self, data: dict[str, Any]) -> list[str]:
        """Upstream's `command`/`shell` pair as an argv: a string without `shell` is split like a shell would, a
        list with `shell` runs its first item as the script (the rest as `$0`, `$1`...), `~/` items expanded."""
        shell = bool(data.get("shell", False))
        command = data.get("command", "" if shell else [])
        if isinstance(command, str):
            items = [command] if shell else shlex.split(command)
        elif isinstance(command, list) and all(isinstance(item, str) for item in command):
            items = list(command)
        else:
            raise BadCommand(f"command must be a string or a list of strings, got {type(command).__name__}")
        if not shell:
            items = [self.home + item[1:] if item.startswith("~/") else item for item in items]
            return items
        return [SHELL, "-c", *items]

    async def run(self, argv: Sequence[str], *, timeout_s: float, cwd: str | None = None) -> Ran:
        """Run to completion in the desktop; a command that cannot start raises SpawnError (a DomainError)."""
        if not argv:
            raise BadCommand("command must not be empty")
        session = self.session()
        result = await self.desktop.processes.run(argv[0], list(argv[1:]), cwd=cwd or session.home,
                                                  env=dict(session.env), timeout_ms=max(1, int(timeout_s * 1000)),
                                                  launcher=self.desktop.launcher())
        return ran(result)

    async def spawn(self, argv: Sequence[str]) -> ManagedProcess:
        """Start in the background as the desktop's own process (listed by its `/processes`, ended with it)."""
        if not argv:
            raise BadCommand("command must not be empty")
        session = self.session()
        env = dict(session.env)
        args = list(argv[1:])
        if env.get(ACCESSIBILITY_MARK) == "1":  # a Chromium-family app fills its page tree, as a launch does
            args = with_accessibility(argv[0], args)
        return await self.desktop.processes.spawn(argv[0], args, cwd=session.home, env=env,
                                                  launcher=self.desktop.launcher(), desktop_id=self.desktop.id)

    def files(self) -> Files:
        """The desktop's files in its own view: its sandbox's, else the machine's (as its `/fs` API)."""
        home = self.home
        sandbox = self.desktop.launcher()
        return Files(home, InSandbox(sandbox) if sandbox is not None else MACHINE)

    async def which(self, name: str) -> str | None:
        """`shutil.which(name)` as the desktop's own PATH finds it, in its view of the files."""
        done = await self.run([SHELL, "-c", 'command -v -- "$1"', "sh", name], timeout_s=10)
        found = done.stdout.strip()
        return found if done.returncode == 0 and posixpath.isabs(found) else None


def temp_name(prefix: str, suffix: str) -> str:
    """A fresh name in the desktop's own /tmp (its sandbox has one of its own)."""
    return f"/tmp/{prefix}{os.urandom(8).hex()}{suffix}"
