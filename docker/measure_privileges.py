"""What a container must grant the server for isolated desktops, measured (docs/kubernetes.md "Isolated desktops").

Runs a real server as root under each condition below, creates a desktop, and checks what a pod's user would:
the server starts, the desktop is created and reports `sandbox.isolated`, a command runs in it as its own uid,
the desktop passes its readiness check (X answers, a screenshot encodes), pause and resume work, delete works,
and the server stops cleanly. A condition is a capability bounding set (`setpriv`), optionally:

- a pod's user namespace, as Kubernetes makes one with `hostUsers: false`: 65536 ids (0-65535 inside), its own
  network, pid, ipc and uts namespaces, a fresh /proc, /tmp and /run, the network namespace owned by the pod's
  user namespace (as the container runtime makes it);
- /proc masked and /proc/sys read-only as a container runtime leaves them (`procMount: Default`), or not
  (`procMount: Unmasked`); the cgroup file system read-only;
- `no_new_privs` (`allowPrivilegeEscalation: false`);
- a seccomp profile (Docker's JSON format, the one a Localhost profile is written in), applied with libseccomp
  before the server starts, so that everything the server, its desktops and their apps run is under it.

    sudo .venv/bin/python docker/measure_privileges.py                    # every condition: ~2-3 min
    sudo .venv/bin/python docker/measure_privileges.py --only minimal userns
    sudo .venv/bin/python docker/measure_privileges.py --syscalls docker/seccomp/measured-syscalls.txt

`--syscalls FILE` runs one unrestricted server under `strace -f` through the same scenario and writes every system
call its process tree made (the server, the zygote, each sandbox's init, Xvfb, the window manager, the buses, the
sound server, the command run) to FILE, and the mounts it made to the terminal: what the seccomp and AppArmor
profiles are built from (docker/seccomp/, docker/apparmor/). Standard library and httpx only; needs root,
`setpriv`, libseccomp (Debian: libseccomp2) and, for `--syscalls`, `strace`.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import dataclasses
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PROFILE = REPO / "docker" / "seccomp" / "sandbox-desktop.json"

MINIMAL = ("SETUID", "SETGID", "SETPCAP", "SYS_ADMIN", "SYS_CHROOT", "NET_ADMIN", "KILL", "CHOWN", "DAC_OVERRIDE",
           "DAC_READ_SEARCH", "FOWNER")
"""The smallest capability set with which every check passes (the `minimal` condition; `minimal-X` drops X)."""
CONTAINER_DEFAULT = ("CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
                     "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE")
"""What Docker and containerd give a container that asks for nothing."""
POD_IDS = 65536
"""The ids a Kubernetes pod with `hostUsers: false` maps (0-65535 inside)."""
POD_HOST_BASE = 1_800_000_000
"""Where this script maps them on the host (the kubelet picks a free multiple of 65536 of its own)."""
POD_SANDBOX_UIDS = "10000-65533"
"""The desktops' uids in such a pod: mapped, above the image's accounts, below `nobody` (65534)."""
MASKED = ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/latency_stats", "/proc/sched_debug")
READ_ONLY = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")
"""What runc masks and makes read-only in a container's /proc (those present on the machine are used)."""
SIZE = {"width": 640, "height": 400}
START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Condition:
    name: str
    what: str
    caps: tuple[str, ...] | None = MINIMAL
    """The bounding set (None: every capability)."""
    userns: bool = False
    uids: str | None = None
    """$SANDBOX_DESKTOP_UIDS for the server."""
    container_proc: bool = False
    """/proc masked and /proc/sys read-only, as a runtime leaves them."""
    ro_cgroup: bool = False
    nnp: bool = False
    ro_root: bool = False
    """The root file system read-only (readOnlyRootFilesystem: true); /tmp and /run stay writable (emptyDirs)."""
    seccomp: str | None = None
    """A seccomp profile file the server starts under."""


def conditions() -> list[Condition]:
    found = [
        Condition("root", "every capability, the machine's namespaces", caps=None),
        Condition("minimal", "the measured set, the machine's namespaces"),
    ]
    found += [Condition(f"minimal-{cap}", f"the measured set without {cap}",
                        caps=tuple(c for c in MINIMAL if c != cap)) for cap in MINIMAL]
    found += [
        Condition("container-default", "Docker's/containerd's default set, nothing added", caps=CONTAINER_DEFAULT),
        Condition("container-masked", "the measured set, /proc masked and /proc/sys read-only as a runtime leaves "
                  "them (procMount: Default), read-only cgroups, no_new_privs",
                  container_proc=True, ro_cgroup=True, nnp=True),
        Condition("container", "the measured set, /proc unmasked (procMount: Unmasked), read-only cgroups, "
                  "no_new_privs", ro_cgroup=True, nnp=True),
        Condition("container-seccomp", "as `container`, under docker/seccomp/sandbox-desktop.json",
                  ro_cgroup=True, nnp=True, seccomp=str(PROFILE)),
        Condition("userns-default-uids", "a pod's user namespace (hostUsers: false), the default uid range",
                  userns=True, ro_cgroup=True, nnp=True),
        Condition("userns-masked", f"a pod's user namespace, SANDBOX_DESKTOP_UIDS={POD_SANDBOX_UIDS}, /proc as a "
                  "runtime leaves it (procMount: Default)", userns=True, uids=POD_SANDBOX_UIDS,
                  container_proc=True, ro_cgroup=True, nnp=True),
        Condition("userns", f"a pod's user namespace, SANDBOX_DESKTOP_UIDS={POD_SANDBOX_UIDS}, procMount: Unmasked",
                  userns=True, uids=POD_SANDBOX_UIDS, ro_cgroup=True, nnp=True),
        Condition("userns-seccomp", "as `userns`, under docker/seccomp/sandbox-desktop.json", userns=True,
                  uids=POD_SANDBOX_UIDS, ro_cgroup=True, nnp=True, seccomp=str(PROFILE)),
        Condition("pod", "as `userns-seccomp`, with a read-only root file system: docker/kubernetes/isolated/",
                  userns=True, uids=POD_SANDBOX_UIDS, ro_cgroup=True, nnp=True, seccomp=str(PROFILE), ro_root=True),
    ]
    found += [Condition(f"userns-{cap}", f"as `userns`, without {cap}", userns=True, uids=POD_SANDBOX_UIDS,
                        ro_cgroup=True, nnp=True, caps=tuple(c for c in MINIMAL if c != cap))
              for cap in MINIMAL]
    return found


# ---- the outside: one child per condition, a table of what passed ----

STEPS = ("start", "create", "isolated", "command", "ready", "pause", "delete", "stop")


def main() -> int:
    if sys.argv[1:2] == ["--seccomp-exec"]:  # before argparse, which would take the command's own `--`
        return seccomp_exec(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", help="conditions to run (default: all)")
    parser.add_argument("--json", type=Path, help="write every result here")
    parser.add_argument("--syscalls", type=Path, help="run the scenario under strace and write the system calls here")
    parser.add_argument("--write-profile", action="store_true",
                        help="write docker/seccomp/sandbox-desktop.json from docker/seccomp/measured-syscalls.txt")
    parser.add_argument("--inside", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        return inside(json.loads(args.inside))
    if args.write_profile:
        return write_profile()
    if os.geteuid() != 0:
        parser.error("the server must be root to isolate desktops: run this as root")
    if args.syscalls:
        return record_syscalls(args.syscalls)
    chosen = [c for c in conditions() if not args.only or c.name in args.only]
    results = []
    for condition in chosen:
        started = time.monotonic()
        result = run_condition(condition)
        result["seconds"] = round(time.monotonic() - started, 1)
        results.append(result)
        print(line(condition, result), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


def line(condition: Condition, result: dict[str, Any]) -> str:
    steps = result.get("steps", {})
    failed = next((f"{s}: {steps[s][1]}" for s in STEPS if s in steps and not steps[s][0]), "")
    layers = result.get("missing") or {}
    verdict = "ISOLATED" if result.get("isolated") else "not isolated" if result.get("isolated") is False else "-"
    text = f"{condition.name:<28} {verdict:<13} passed {sum(1 for s in steps.values() if s[0])}/{len(STEPS)}"
    if layers:
        text += f"  missing: {', '.join(sorted(layers))}"
    if failed:
        text += f"\n{'':<29}first failure: {failed[:400]}"
    for warning in result.get("warnings", [])[:4]:
        text += f"\n{'':<29}server: {warning[:300]}"
    return text


def run_condition(condition: Condition) -> dict[str, Any]:
    """The condition's checks, run by a child of this script in the namespaces the condition asks for."""
    payload = json.dumps(dataclasses.asdict(condition))
    command = [sys.executable, str(Path(__file__).resolve()), "--inside", payload]
    if condition.userns:
        proc = pod_process(command)
    else:
        # A mount namespace of its own (read-only cgroups, /proc as in a container); mounts of the machine still
        # reach it, and /run's files are the machine's (locks that other servers check stay visible).
        proc = subprocess.Popen(["unshare", "--mount", "--propagation", "slave", *command], stdout=subprocess.PIPE,
                                text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    for text in reversed((out or "").splitlines()):
        if text.startswith("{"):
            return dict(json.loads(text))
    return {"steps": {"start": [False, f"the measuring child exited with {proc.returncode}: {out[-500:]!r}"]}}


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000


def _unshare(flags: int) -> None:
    if _libc.unshare(ctypes.c_int(flags)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def text(value: str | None) -> bytes | None:
        return value.encode() if value is not None else None

    if _libc.mount(text(source), target.encode(), text(fstype), ctypes.c_ulong(flags), text(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18


def _image_view() -> None:
    """A mount namespace (of the machine's user namespace) in which the interpreter is reachable by the pod's root,
    as an image's is: this machine's Python may live under /root (mode 0700), which an unmapped owner's mode
    closes to a user namespace's root. The folders on its way are covered with open ones, it is bound back."""
    _unshare(CLONE_NEWNS)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    python = Path(os.path.realpath(sys.executable))
    for closed in [p for p in reversed(python.parents) if p != Path("/") and not os.stat(p).st_mode & 0o001][:1]:
        _tmpfs_keeping(str(closed), "mode=755", [p for p in python.parents if p.parent == closed][:1] or [python])


def _tmpfs_keeping(path: str, options: str, keep: list[Path]) -> None:
    """An empty tmpfs over `path`, with each of `keep` (within it) bound back at its own place."""
    held = [os.open(p, os.O_PATH | os.O_CLOEXEC) for p in keep]
    _mount("tmpfs", path, "tmpfs", 0, options)
    for kept, fd in zip(keep, held, strict=True):
        os.makedirs(kept, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", str(kept), None, MS_BIND | MS_REC)
        os.close(fd)


def pod_process(command: list[str]) -> subprocess.Popen[str]:
    """`command` as root of a new user namespace mapping POD_IDS ids, with its own mount, network, pid, ipc and
    uts namespaces created inside it (so that they are owned by it, as a runtime makes a pod's), as PID 1 of
    the new pid namespace. Returns the process of this script's side; its stdout is the command's."""
    ready_r, ready_w = os.pipe()
    mapped_r, mapped_w = os.pipe()

    def child() -> None:
        os.close(ready_r)
        os.close(mapped_w)
        _image_view()
        _unshare(CLONE_NEWUSER)
        os.write(ready_w, str(os.getpid()).encode())
        os.read(mapped_r, 1)  # the parent wrote our maps: we are root here, with every capability of the namespace
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
        _unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS)

    def write_maps() -> None:
        # A thread: Popen returns only once the child has exec'd, and the child waits for its maps first.
        try:
            pid = os.read(ready_r, 32).decode()
            if pid.isdigit():
                Path(f"/proc/{pid}/uid_map").write_text(f"0 {POD_HOST_BASE} {POD_IDS}\n")
                Path(f"/proc/{pid}/gid_map").write_text(f"0 {POD_HOST_BASE} {POD_IDS}\n")
                os.write(mapped_w, b"m")
        finally:
            os.close(mapped_w)  # without maps the child reads end-of-file and fails to become root
            os.close(ready_r)

    mapper = threading.Thread(target=write_maps, daemon=True)
    mapper.start()
    try:
        proc = subprocess.Popen(
            ["unshare", "--fork", "--kill-child", "--", *command], stdout=subprocess.PIPE, text=True,
            preexec_fn=child, pass_fds=(ready_w, mapped_r), start_new_session=True)
    finally:
        os.close(ready_w)
        os.close(mapped_r)
        mapper.join(10)
    return proc


# ---- the inside: the container's view, the server, the checks ----

def inside(spec: dict[str, Any]) -> int:
    condition = Condition(**{k: tuple(v) if k == "caps" and v is not None else v for k, v in spec.items()})
    result: dict[str, Any] = {"condition": condition.name, "steps": {}}
    with tempfile.TemporaryDirectory(prefix="measure-", ignore_cleanup_errors=True) as scratch:
        try:
            root = prepare(condition, Path(scratch))
            run_checks(condition, root, result)
        except Exception as exc:  # reported as the failing step: this child's only output is the result
            result["steps"].setdefault("start", [False, f"{type(exc).__name__}: {exc}"])
    print(json.dumps(result), flush=True)
    return 0


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


def prepare(condition: Condition, scratch: Path) -> Path:
    """The container's file system view in this mount namespace; where the server keeps its state."""
    if condition.userns:
        mount("--make-rprivate", "/")
        mount("-t", "proc", "-o", "nosuid,nodev,noexec", "proc", "/proc")  # of the pod's pid namespace
        for path in ("/tmp", "/run"):  # emptyDir volumes
            _cover(path, "mode=1777" if path == "/tmp" else "mode=755")
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        if condition.ro_root:
            mount("-o", "remount,bind,ro", "/")
        state = Path("/tmp/state")
    else:
        state = scratch / "state"
    if condition.container_proc:
        for path in MASKED:
            if os.path.exists(path):
                mount("--bind", "/dev/null", path)
        for path in READ_ONLY:
            if os.path.exists(path):
                mount("--bind", path, path)
                mount("-o", "remount,bind,ro", path)
    if condition.ro_cgroup:
        for path in cgroup_mounts():
            mount("-o", "remount,bind,ro", path) if _is_mountpoint(path) else None
    state.mkdir(parents=True, exist_ok=True)
    return state


def _cover(path: str, options: str) -> None:
    """An empty tmpfs over `path`, as a pod's emptyDir volume is, through which this repository and its Python's
    prefix (a virtual environment) stay where they are: in an image they are outside it, and a checkout in /tmp
    would otherwise leave the server nothing to import."""
    under = [p for p in (REPO, Path(sys.prefix)) if Path(path) in p.parents]
    _tmpfs_keeping(path, options, [p for p in dict.fromkeys(under) if not any(q in p.parents for q in under)])


def cgroup_mounts() -> list[str]:
    found = []
    for text in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, rest = text.partition(" - ")
        if rest.split()[:1] in (["cgroup"], ["cgroup2"]):
            found.append(fields.split()[4])
    return found


def _is_mountpoint(path: str) -> bool:
    return subprocess.run(["mountpoint", "-q", path]).returncode == 0


def server_command(condition: Condition, state: Path, port: int, token: str) -> list[str]:
    python = os.environ.get("MEASURE_PYTHON", sys.executable)
    command = [python, "-m", "api.cli.main", "server", "--port", str(port), "--state-dir", str(state),
               f"--token={token}", "--log-level", "info", "--max-desktops", "2"]
    if condition.seccomp:
        command = [python, str(Path(__file__).resolve()), "--seccomp-exec", condition.seccomp,
                   ",".join(condition.caps or ()), "--", *command]
    prefix = ["setpriv"]
    if condition.caps is not None:
        prefix += ["--bounding-set", ",".join(["-all", *(f"+{c.lower()}" for c in condition.caps)])]
    if condition.nnp:
        prefix.append("--no-new-privs")
    return [*prefix, *command] if len(prefix) > 1 else command


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def run_checks(condition: Condition, state: Path, result: dict[str, Any]) -> None:
    import httpx  # the venv's; imported here so that --seccomp-exec runs under any Python

    steps: dict[str, list[Any]] = result["steps"]
    port, token = free_port(), secrets.token_urlsafe(16)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_DESKTOP_")}
    env.update(HOME=str(state / "home"), XDG_STATE_HOME=str(state / "xdg"), PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=f"{REPO}:{REPO / 'client'}")
    if condition.uids:
        env["SANDBOX_DESKTOP_UIDS"] = condition.uids
    log_path = state / "server.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(server_command(condition, state, port, token), cwd=REPO, env=env, stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    api = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"},
                       timeout=60)
    try:
        drive(api, server, steps, result)
    finally:
        stopped = stop(server)
        steps["stop"] = [stopped is not None and stopped in (0, -15, 143),
                         f"exit status {stopped}" if stopped is not None else "killed after 15 s"]
        result["warnings"] = warnings(log_path.read_text(errors="replace"))
        api.close()


def drive(api: Any, server: subprocess.Popen[bytes], steps: dict[str, list[Any]], result: dict[str, Any]) -> None:
    def check(name: str, ok: bool, detail: str) -> bool:
        steps[name] = [ok, detail]
        return ok

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if server.poll() is not None:
            check("start", False, f"the server exited with {server.returncode}")
            return
        with contextlib.suppress(Exception):
            if api.get("/v1/health", timeout=1).status_code == 200:
                break
        if time.monotonic() > deadline:
            check("start", False, f"no answer in {START_TIMEOUT_S:.0f} s")
            return
        time.sleep(0.1)
    check("start", True, "healthy")
    made = api.post("/v1/desktops", json=SIZE)
    if not check("create", made.status_code == 201, f"{made.status_code} {made.text[:300]}"):
        return
    desktop = made.json()
    sandbox = desktop.get("sandbox") or {}
    result["isolated"], result["missing"] = sandbox.get("isolated"), sandbox.get("missing") or {}
    result["layers"] = sandbox.get("layers") or []
    check("isolated", sandbox.get("isolated") is True, json.dumps(sandbox.get("missing") or {})[:300])
    base = f"/v1/desktops/{desktop['id']}"
    try:
        run = api.post(f"{base}/processes/run", json={"command": "sh", "args": ["-c", "id -u; id -g"],
                                                      "timeoutMs": 20000})
        body = run.json() if run.status_code == 200 else {}
        ids = (body.get("stdout") or "").split()
        check("command", run.status_code == 200 and body.get("exitCode") == 0 and ids[:1] != ["0"],
              f"{run.status_code} uid/gid {ids}" if run.status_code == 200 else f"{run.status_code} {run.text[:300]}")
        ready = api.get(f"{base}/health/ready")
        check("ready", ready.status_code == 200, f"{ready.status_code} {ready.text[:300]}")
        paused = api.post(f"{base}/pause")
        resumed = api.post(f"{base}/resume")
        check("pause", paused.status_code < 300 and resumed.status_code < 300,
              f"pause {paused.status_code} {paused.text[:150]} resume {resumed.status_code} {resumed.text[:150]}")
    finally:
        deleted = api.delete(base)
        check("delete", deleted.status_code < 300, f"{deleted.status_code} {deleted.text[:200]}")


def stop(server: subprocess.Popen[bytes]) -> int | None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
            return None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGKILL)  # whatever of its group outlived it
    return server.returncode


WARNING = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b|Traceback|warning:")


EXCEPTION = re.compile(r"^[A-Za-z_.]*(Error|Exception|Failed|Unavailable)\b.*:")


def warnings(log: str) -> list[str]:
    """The server's warnings and errors, each traceback as its last line (the exception)."""
    found = []
    for text in log.splitlines():
        exception = EXCEPTION.match(text)
        if exception or (WARNING.search(text) and "Traceback" not in text and "Exception in ASGI" not in text):
            found.append(text.strip())
    return list(dict.fromkeys(found))[:12]


# ---- seccomp: a Docker-format profile applied with libseccomp, then exec ----

SCMP_ACT_ALLOW = 0x7FFF0000
OPS = {"SCMP_CMP_NE": 1, "SCMP_CMP_LT": 2, "SCMP_CMP_LE": 3, "SCMP_CMP_EQ": 4, "SCMP_CMP_GE": 5, "SCMP_CMP_GT": 6,
       "SCMP_CMP_MASKED_EQ": 7}
ARCH_NAMES = {"amd64", "x86_64", "SCMP_ARCH_X86_64"}


class ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


def _action(name: str, errno_ret: int | None, default_errno: int) -> int:
    if name == "SCMP_ACT_ALLOW":
        return SCMP_ACT_ALLOW
    if name == "SCMP_ACT_ERRNO":
        return 0x00050000 | ((default_errno if errno_ret is None else errno_ret) & 0xFFFF)
    raise ValueError(f"action {name} is not one this script applies")


def applies(rule: dict[str, Any], caps: set[str]) -> bool:
    """Docker's `includes`/`excludes`, for the capabilities the container holds, on x86-64."""
    includes, excludes = rule.get("includes") or {}, rule.get("excludes") or {}
    if includes.get("caps") and not {f"CAP_{c}" for c in caps} >= set(includes["caps"]):
        return False
    if includes.get("arches") and not ARCH_NAMES & set(includes["arches"]):
        return False
    if excludes.get("caps") and {f"CAP_{c}" for c in caps} & set(excludes["caps"]):
        return False
    return not (excludes.get("arches") and ARCH_NAMES & set(excludes["arches"]))


def allowed_names(profile: dict[str, Any], caps: set[str]) -> set[str]:
    """The system calls a profile allows outright (no argument condition) to a container with `caps`."""
    return {name for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("args")
            and applies(rule, caps) for name in rule["names"]}


def seccomp_exec(argv: list[str]) -> int:
    """`--seccomp-exec PROFILE CAPS -- COMMAND...`: load PROFILE for a container holding CAPS, exec COMMAND."""
    profile_path, caps_text, separator, *command = argv
    assert separator == "--" and command, "usage: --seccomp-exec PROFILE CAPS -- COMMAND..."
    profile = json.loads(Path(profile_path).read_text())
    caps = {c for c in caps_text.split(",") if c}
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    default_errno = profile.get("defaultErrnoRet", 1)
    ctx = lib.seccomp_init(ctypes.c_uint32(_action(profile["defaultAction"], None, default_errno)))
    for rule in profile["syscalls"]:
        if not applies(rule, caps):
            continue
        action = _action(rule["action"], rule.get("errnoRet"), default_errno)
        if action == _action(profile["defaultAction"], None, default_errno):
            continue  # what the default does anyway (libseccomp refuses such a rule)
        args = rule.get("args") or []
        # Docker: conditions on different arguments are one rule (all must hold), on the same argument one rule each.
        groups = [args] if len({a["index"] for a in args}) == len(args) else [[a] for a in args]
        for name in rule["names"]:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                continue  # a name this libseccomp does not know (another architecture's, or newer)
            for group in groups or [[]]:
                array = (ArgCmp * max(len(group), 1))(*[
                    ArgCmp(a["index"], OPS[a["op"]], *((a["value"], a.get("valueTwo", 0))
                                                       if a["op"] == "SCMP_CMP_MASKED_EQ" else (a["value"], 0)))
                    for a in group])
                if lib.seccomp_rule_add_array(ctx, action, number, len(group), array) < 0:
                    raise OSError(f"seccomp: the rule for {name} was refused")
    if lib.seccomp_load(ctx) != 0:
        raise OSError("seccomp: the filter could not be loaded (no_new_privs or CAP_SYS_ADMIN is needed)")
    os.execvp(command[0], command)
    return 127


# ---- the seccomp profile: the measured calls, and every other call but those a runtime's default keeps out ----

MEASURED = REPO / "docker" / "seccomp" / "measured-syscalls.txt"
DENIED = {
    "kernel modules, kexec, reboot, swap, accounting": ("create_module", "init_module", "finit_module",
        "delete_module", "get_kernel_syms", "query_module", "kexec_load", "kexec_file_load", "reboot", "swapon",
        "swapoff", "acct", "uselib", "nfsservctl", "_sysctl"),
    "the machine's clock": ("settimeofday", "clock_settime", "adjtimex", "clock_adjtime", "stime"),
    "tracing, kernel introspection and other processes' memory": ("ptrace", "process_vm_readv",
        "process_vm_writev", "process_madvise", "kcmp", "pidfd_getfd", "perf_event_open", "bpf", "syslog",
        "lookup_dcookie", "fanotify_init", "userfaultfd"),
    "raw hardware, quotas, handles, keys": ("iopl", "ioperm", "quotactl", "quotactl_fd", "open_by_handle_at",
        "name_to_handle_at", "add_key", "request_key", "keyctl", "vhangup"),
    "mounts the server does not make (it uses mount(2) only), root switches, the domain name": ("fsopen",
        "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr", "pivot_root", "chroot",
        "setdomainname"),
    "NUMA policy, io_uring": ("get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node", "migrate_pages",
        "move_pages", "io_uring_setup", "io_uring_enter", "io_uring_register"),
}
"""What the profile keeps out: what the runtimes' default profiles refuse a container without extra capabilities,
less what the measured scenario calls (mount, umount2, unshare, setns, sethostname: the sandboxes' own)."""
LAST_SYSCALL = 470


def known_syscalls() -> list[str]:
    """Every x86-64 system call this machine's libseccomp names."""
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2")
    lib.seccomp_syscall_resolve_num_arch.restype = ctypes.c_void_p
    lib.seccomp_syscall_resolve_num_arch.argtypes = [ctypes.c_uint32, ctypes.c_int]
    libc_free = _libc.free
    libc_free.argtypes = [ctypes.c_void_p]
    names = []
    for number in range(LAST_SYSCALL):
        pointer = lib.seccomp_syscall_resolve_num_arch(0xC000003E, number)  # SCMP_ARCH_X86_64
        if pointer:
            names.append(ctypes.string_at(pointer).decode())
            libc_free(pointer)
    return names


def measured_syscalls(path: Path = MEASURED) -> set[str]:
    return {line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")}


def build_profile(measured: set[str], known: list[str]) -> dict[str, Any]:
    denied = {name for names in DENIED.values() for name in names}
    allowed = sorted((set(known) - denied) | measured)
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": 1,
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
        "syscalls": [
            {"names": allowed, "action": "SCMP_ACT_ALLOW",
             "comment": f"written by `docker/measure_privileges.py --write-profile`: the {len(measured)} calls "
                        "of docker/seccomp/measured-syscalls.txt, and every other x86-64 call but those below"},
            *({"names": sorted(set(names) - measured), "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
               "comment": f"denied: {why}"} for why, names in DENIED.items()),
        ],
    }


def write_profile(out: Path = PROFILE) -> int:
    measured = measured_syscalls()
    if overlap := measured & {name for names in DENIED.values() for name in names}:
        print(f"measured calls the denied list names (allowed): {', '.join(sorted(overlap))}")
    profile = build_profile(measured, known_syscalls())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(profile, indent=1) + "\n")
    print(f"{len(profile['syscalls'][0]['names'])} system calls allowed, "
          f"{sum(len(r['names']) for r in profile['syscalls'][1:])} denied -> {out}")
    return 0


# ---- the system calls and mounts of the scenario, for the profiles ----

SYSCALL = re.compile(r"^\d+\s+(?:<\.\.\. )?([a-z0-9_]+)(?:\(| resumed>)")
MOUNT_CALL = re.compile(r"^\d+\s+(mount|umount2|unshare|setns|sethostname|pivot_root|chroot)\((.*)$")


def record_syscalls(out: Path) -> int:
    if shutil.which("strace") is None:
        sys.exit("strace is not installed (Debian: strace)")
    with tempfile.TemporaryDirectory(prefix="measure-strace-") as scratch:
        trace = Path(scratch) / "trace"
        os.environ["MEASURE_PYTHON"] = sys.executable
        condition = Condition("strace", "every capability, under strace -f", caps=None)
        result: dict[str, Any] = {"steps": {}}
        state = Path(scratch) / "state"
        state.mkdir()
        original = server_command

        def traced(c: Condition, s: Path, port: int, token: str) -> list[str]:
            return ["strace", "-f", "-qq", "-s", "200", "-o", str(trace), *original(c, s, port, token)]

        with _replaced(globals(), "server_command", traced):
            run_checks(condition, state, result)
        print(json.dumps(result["steps"]))
        names: set[str] = set()
        mounts: set[str] = set()
        for text in trace.read_text(errors="replace").splitlines():
            if match := SYSCALL.match(text):
                names.add(match.group(1))
            if match := MOUNT_CALL.match(text):
                mounts.add(f"{match.group(1)}({_plain(match.group(2))})")
    header = ("# System calls made by the server's whole process tree through docker/measure_privileges.py's scenario\n"
              "# (start, create an isolated desktop, run a command in it, readiness, pause, resume, delete, stop),\n"
              "# written by `docker/measure_privileges.py --syscalls`. tests/deploy checks that\n"
              "# docker/seccomp/sandbox-desktop.json allows each one.\n")
    out.write_text(header + "".join(f"{name}\n" for name in sorted(names)))
    print(f"{len(names)} system calls -> {out}")
    print("namespace and mount calls made:")
    for text in sorted(mounts):
        print("  " + text)
    return 0 if all(ok for ok, _ in result["steps"].values()) else 1


def _plain(args: str) -> str:
    """A mount call's arguments without the values that change from run to run."""
    args = re.sub(r"/proc/self/fd/\d+", "/proc/self/fd/N", args)
    args = re.sub(r"/tmp/measure-[^/\"]+", "/tmp/…", args)
    args = re.sub(r"sdnet-\d+-\d+-\d+", "sdnet-…", args)
    args = re.sub(r"\b\d{3,}\b", "N", args)
    return args


@contextlib.contextmanager
def _replaced(namespace: dict[str, Any], name: str, value: Callable[..., Any]) -> Iterator[None]:
    before = namespace[name]
    namespace[name] = value
    try:
        yield
    finally:
        namespace[name] = before


if __name__ == "__main__":
    sys.exit(main())
