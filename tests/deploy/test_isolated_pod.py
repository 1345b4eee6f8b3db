"""The isolated-desktops overlay (docker/kubernetes-isolated/): valid, and in step with what
docker/measure_privileges.py measured (the capabilities, the uid range, the seccomp profile's system calls) and
with the AppArmor profile it names. The one-desktop-per-pod base stays the fallback
(tests/deploy/test_kubernetes.py)."""

from __future__ import annotations

import ctypes.util
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from functools import cache
from types import ModuleType
from typing import Any

import kubernetes_validate
import pytest

from desktop.sandbox.users import UidRange
from tests.conftest import REPO
from tests.deploy.test_kubernetes import kustomize

OVERLAY = REPO / "docker" / "kubernetes-isolated"
SECCOMP = REPO / "docker" / "seccomp" / "sandbox-desktop.json"
APPARMOR = REPO / "docker" / "apparmor" / "sandbox-desktop"
# appArmorProfile is a field from 1.30; hostUsers and procMount: Unmasked are older.
VERSIONS = ("1.30.0", kubernetes_validate.latest_version())


@cache
def measure() -> ModuleType:
    spec = importlib.util.spec_from_file_location("measure_privileges", REPO / "docker" / "measure_privileges.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@cache
def rendered() -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in kustomize(OVERLAY)}


def container() -> dict[str, Any]:
    containers = rendered()["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def env(name: str) -> str:
    return str(next(e["value"] for e in container()["env"] if e["name"] == name))


def test_the_overlay_renders_the_base_and_is_valid() -> None:
    assert set(rendered()) == {"Deployment", "Service", "NetworkPolicy"}
    for doc in rendered().values():
        for version in VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)


def test_the_server_is_root_of_the_pods_own_user_namespace() -> None:
    pod = rendered()["Deployment"]["spec"]["template"]["spec"]
    assert pod["hostUsers"] is False
    assert pod["securityContext"]["runAsUser"] == 0 and pod["securityContext"]["runAsNonRoot"] is False
    context = container()["securityContext"]
    assert context["privileged"] is False and context["procMount"] == "Unmasked"
    assert context["readOnlyRootFilesystem"] is True


def test_the_capabilities_are_the_measured_set() -> None:
    capabilities = container()["securityContext"]["capabilities"]
    assert capabilities["drop"] == ["ALL"]
    assert capabilities["add"] == list(measure().MINIMAL)
    # Kubernetes refuses allowPrivilegeEscalation: false together with SYS_ADMIN.
    assert "SYS_ADMIN" in capabilities["add"] and container()["securityContext"]["allowPrivilegeEscalation"] is True


def test_the_desktops_uids_are_mapped_in_the_pod() -> None:
    uids = UidRange.parse(env("SANDBOX_DESKTOP_UIDS"))
    assert str(uids) == measure().POD_SANDBOX_UIDS
    pod_map = f"0 {measure().POD_HOST_BASE} {measure().POD_IDS}\n"
    assert uids.unmapped(pod_map) is None
    assert UidRange().unmapped(pod_map) is not None  # why the default range will not do
    assert env("SANDBOX_DESKTOP_ISOLATION") == "required"


def test_the_seccomp_profile_allows_every_measured_call_and_keeps_the_kernels_interfaces_out() -> None:
    profile = json.loads(SECCOMP.read_text())
    assert container()["securityContext"]["seccompProfile"] == {
        "type": "Localhost", "localhostProfile": f"profiles/{SECCOMP.name}"}
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    allowed = measure().allowed_names(profile, set(measure().MINIMAL))
    measured = measure().measured_syscalls()
    assert len(measured) > 100 and measured <= allowed, sorted(measured - allowed)
    assert {"mount", "umount2", "unshare", "setns", "sethostname", "clone3"} <= measured
    denied = {name for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ERRNO" for name in rule["names"]}
    assert not denied & allowed
    assert {"kexec_load", "init_module", "bpf", "ptrace", "pivot_root", "open_by_handle_at", "keyctl"} <= denied
    # Regenerated from the measured list, it is the same file (on a machine with libseccomp).
    try:
        known = measure().known_syscalls()
    except OSError:
        pytest.skip("no libseccomp here")
    assert measure().build_profile(measured, known)["syscalls"][1:] == profile["syscalls"][1:]


def test_the_apparmor_profile_is_the_one_named_and_parses() -> None:
    assert container()["securityContext"]["appArmorProfile"] == {
        "type": "Localhost", "localhostProfile": "sandbox-desktop"}
    text = APPARMOR.read_text()
    assert "profile sandbox-desktop " in text and "mount fstype=proc" in text and "deny pivot_root" in text
    parser = shutil.which("apparmor_parser")
    if parser is None:
        pytest.skip("apparmor_parser is not installed")
    done = subprocess.run([parser, "-Q", "-K", str(APPARMOR)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_what_the_server_writes_is_a_volume() -> None:
    mounted = {m["mountPath"] for m in container()["volumeMounts"]}
    assert {"/run", "/tmp", "/root", "/var/lib/sandbox-desktop", "/dev/shm"} <= mounted
    assert env("HOME") == "/root"


@pytest.mark.parametrize("name", ["minimal", "pod"])
def test_a_server_with_the_measured_set_isolates_desktops(name: str) -> None:
    """The measured set, run: a real server as root with only those capabilities (`minimal`), and as the overlay
    runs it (`pod`: a pod's user namespace, its uid range, the seccomp profile, a read-only root) creates an
    isolated desktop, runs a command in it, pauses, resumes and deletes it. A new need (one more capability, a
    system call) fails here, where the overlay's own checks above only compare lists."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None or shutil.which("unshare") is None:
        pytest.skip("needs root, setpriv and unshare (util-linux)")
    if name == "pod" and ctypes.util.find_library("seccomp") is None:
        pytest.skip("the pod runs under the seccomp profile, loaded with libseccomp (Debian: libseccomp2)")
    condition = next(c for c in measure().conditions() if c.name == name)
    result = measure().run_condition(condition)
    assert result.get("isolated") is True and all(ok for ok, _ in result.get("steps", {}).values()) \
        and len(result.get("steps", {})) == len(measure().STEPS), measure().line(condition, result)
