"""A server that is not root, on a machine where the tests are (docs/security.md "Without root").

`unprivileged_user()` makes a system user for the tests (once: it is kept if it was there before, removed
if the fixture made it), `launch_as(user, ...)` starts a real `sandbox-desktop server` as that user with a
Python it may run, and `refuse_unshare()` runs a command under a seccomp filter that refuses unshare(2), as
Docker's default profile refuses user namespaces.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO, ServerProcess, free_port, wait_healthy

USER = "sd-rootless-test"


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int


def missing_tools() -> str | None:
    """Why these tests cannot run here (None where they can)."""
    if os.geteuid() != 0:
        return "making a test user and running a server as it needs root"
    for tool in ("setpriv", "useradd", "userdel"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if python_for_users() is None:
        return f"no Python {sys.version_info[0]}.{sys.version_info[1]} that other users may run"
    return None


@contextlib.contextmanager
def unprivileged_user() -> Iterator[User]:
    made = False
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell",
                        "/usr/sbin/nologin", USER], check=True, capture_output=True)
        entry, made = pwd.getpwnam(USER), True
    try:
        yield User(USER, entry.pw_uid, entry.pw_gid)
    finally:
        if made:
            subprocess.run(["userdel", USER], capture_output=True)


def python_for_users() -> str | None:
    """A Python of this version that other users may execute (a venv's may be under root's 0700 HOME)."""
    for candidate in (sys.executable, f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"):
        real = os.path.realpath(candidate)
        if os.path.exists(real) and all(os.stat(p).st_mode & 0o001 for p in _ancestors(real)):
            return candidate
    return None


def _ancestors(path: str) -> list[str]:
    parts = Path(path).parents
    return [str(p) for p in parts]


def own_folder(user: User, prefix: str, parent: str | None = None) -> Path:
    """A new folder of `user`'s own (pytest's are under root's 0700 one)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    os.chown(path, user.uid, user.gid)
    return path


def launch_as(user: User, folder: Path, *extra: str, wrapper: tuple[str, ...] = ()) -> ServerProcess:
    """`sandbox-desktop server` as `user`, its state (and the token it makes) in `folder`."""
    python = python_for_users()
    assert python is not None
    port = free_port()
    state_dir = folder / "state"
    log_path = folder / "server.log"
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(folder), "LANG": "C.UTF-8", "SHELL": "/bin/sh",
           "XDG_STATE_HOME": str(folder / "xdg-state"), "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "client"), *site.getsitepackages()])}
    args = [*wrapper, python, "-m", "api.cli.main", "server", "--port", str(port), "--state-dir", str(state_dir),
            "--log-level", "warning", "--xauthority", str(folder / "xauthority"), *extra]
    command = ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", "--reset-env",
               "env", *(f"{k}={v}" for k, v in env.items()), *args]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = ServerProcess(f"http://127.0.0.1:{port}", None, state_dir, proc, log_path, command)
    wait_healthy(server)
    server.token = (state_dir / "token").read_text().strip()
    return server


@contextlib.contextmanager
def server_as(user: User, prefix: str, *extra: str) -> Iterator[ServerProcess]:
    """`launch_as` in a folder of `user`'s own (`own_folder`), stopped and removed on leaving."""
    folder = own_folder(user, prefix)
    server = launch_as(user, folder, *extra)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


REFUSE_UNSHARE = """
import ctypes, os, struct, sys
# A seccomp filter: unshare(2) fails with EPERM; every other call is allowed (x86-64 numbers).
AUDIT_ARCH_X86_64, NR_UNSHARE, EPERM = 0xC000003E, 272, 1
LD_W_ABS, JEQ_K, RET_K = 0x20, 0x15, 0x06
code = [(LD_W_ABS, 0, 0, 4), (JEQ_K, 1, 0, AUDIT_ARCH_X86_64), (RET_K, 0, 0, 0x7FFF0000),
        (LD_W_ABS, 0, 0, 0), (JEQ_K, 0, 1, NR_UNSHARE), (RET_K, 0, 0, 0x00050000 | EPERM), (RET_K, 0, 0, 0x7FFF0000)]
program = b"".join(struct.pack("HBBI", *op) for op in code)
buffer = ctypes.create_string_buffer(program)
fprog = struct.pack("HxxxxxxP", len(code), ctypes.addressof(buffer))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # no_new_privs
assert libc.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0) == 0, ctypes.get_errno()  # SECCOMP_MODE_FILTER
os.execvp(sys.argv[1], sys.argv[1:])
"""


def refuse_unshare() -> tuple[str, ...]:
    """A command prefix: what follows runs where unshare(2) is refused (x86-64 only)."""
    python = python_for_users()
    assert python is not None
    return (python, "-I", "-S", "-c", REFUSE_UNSHARE)
