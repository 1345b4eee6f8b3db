"""The `sandbox-desktop` provider of OSWorld's harness (client/sandbox_desktop_client/osworld.py, docs/osworld.md)
against a real server.

Here against a stand-in `desktop_env` 1.0.2 written by the test: its abstract VMManager and Provider, its provider
factory and `DesktopEnv.__init__`'s provider-name check, in the shape of the real one (the two places `install()`
patches), without its dependencies (torch among them, docs/osworld.md); and against the real package, in an
interpreter $OSWORLD_DESKTOP_ENV_PYTHON names or else one built once in the user's cache
(tests/support/desktop_env_python.py): two tasks in test_real_desktop_env_runs_a_task, the parallel example in
test_the_parallel_example_runs_tasks_on_desktops_at_once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import REPO, ServerProcess
from tests.support.desktop_env_python import STAND_INS, desktop_env_python

OSWORLD_PYTHON = True  # the module server's desktops get the desktops' Python (tests/conftest.py)
BASE = '''
from abc import ABC, abstractmethod


class Provider(ABC):
    def __init__(self, region=None):
        self.region = region

    @abstractmethod
    def start_emulator(self, path_to_vm, headless): ...
    @abstractmethod
    def get_ip_address(self, path_to_vm): ...
    @abstractmethod
    def save_state(self, path_to_vm, snapshot_name): ...
    @abstractmethod
    def revert_to_snapshot(self, path_to_vm, snapshot_name): ...
    @abstractmethod
    def stop_emulator(self, path_to_vm): ...


class VMManager(ABC):
    @abstractmethod
    def initialize_registry(self, **kwargs): ...
    @abstractmethod
    def add_vm(self, vm_path, **kwargs): ...
    @abstractmethod
    def delete_vm(self, vm_path, **kwargs): ...
    @abstractmethod
    def occupy_vm(self, vm_path, pid, **kwargs): ...
    @abstractmethod
    def list_free_vms(self, **kwargs): ...
    @abstractmethod
    def check_and_clean(self, **kwargs): ...
    @abstractmethod
    def get_vm_path(self, **kwargs): ...
'''
FACTORY = '''
from desktop_env.providers.base import VMManager, Provider


def create_vm_manager_and_provider(provider_name, region, use_proxy=False):
    provider_name = provider_name.lower().strip()
    if provider_name == "vmware":
        return "vmware-manager", "vmware-provider"
    raise NotImplementedError(f"{provider_name} not implemented!")
'''
ENV = '''
import os

from desktop_env.providers import create_vm_manager_and_provider


class DesktopEnv:
    def __init__(self, provider_name="vmware", region=None, path_to_vm=None, snapshot_name="init_state",
                 screen_size=(1920, 1080), os_type="Ubuntu"):
        self.region = region
        self.provider_name = provider_name
        self.manager, self.provider = create_vm_manager_and_provider(provider_name, region, use_proxy=False)
        if self.provider_name in {CLEAN}:
            self.is_environment_used = False
        elif self.provider_name in {"vmware", "virtualbox"}:
            self.is_environment_used = True
        else:
            raise ValueError(f"Invalid provider name: {self.provider_name}")
        self.path_to_vm = path_to_vm or self.manager.get_vm_path(os_type=os_type, region=region,
                                                                 screen_size=screen_size)
        self.snapshot_name = snapshot_name
        self.os_type = os_type
        self._start_emulator()

    def _start_emulator(self):
        self.provider.start_emulator(self.path_to_vm, True, self.os_type)
        parts = self.provider.get_ip_address(self.path_to_vm).split(":")
        self.vm_ip = parts[0]
        self.server_port, self.chromium_port, self.vnc_port, self.vlc_port = map(int, parts[1:])

    def _revert_to_snapshot(self):
        path_to_vm = self.provider.revert_to_snapshot(self.path_to_vm, self.snapshot_name)
        if path_to_vm and path_to_vm != self.path_to_vm:
            self.manager.delete_vm(self.path_to_vm, self.region)
            self.manager.add_vm(path_to_vm, self.region)
            self.manager.occupy_vm(path_to_vm, os.getpid(), self.region)
            self.path_to_vm = path_to_vm

    def close(self):
        self.provider.stop_emulator(self.path_to_vm)
'''
CLEAN_START = '"docker", "aws", "gcp", "azure", "aliyun", "volcengine"'


def stand_in(folder: Path, version: str = "1.0.2", clean: str = CLEAN_START) -> Path:
    package = folder / "desktop_env"
    (package / "providers").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "providers" / "base.py").write_text(BASE)
    (package / "providers" / "__init__.py").write_text(FACTORY)
    (package / "desktop_env.py").write_text(ENV.replace("CLEAN", clean))
    info = folder / f"desktop_env-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: desktop-env\nVersion: {version}\n")
    return folder


def run_script(folder: Path, srv: ServerProcess, script: str) -> subprocess.CompletedProcess[str]:
    """`script` in a fresh interpreter that imports the stand-in (`install()` patches modules: none of this
    test process's)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO / "client")])}
    prelude = f"URL, TOKEN = {srv.url!r}, {srv.token!r}\n"
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(script)], env=env, capture_output=True,
                          text=True, timeout=180)


def desktop(api: httpx.Client, desktop_id: str) -> dict[str, Any]:
    return dict(api.get(f"/v1/desktops/{desktop_id}").json())


def test_each_env_is_a_desktop_with_its_ports(tmp_path: Path, srv: ServerProcess, api: httpx.Client) -> None:
    done = run_script(stand_in(tmp_path), srv, """
        import json
        from sandbox_desktop_client import osworld
        osworld.install(URL, token=TOKEN)
        osworld.install(URL, token=TOKEN)  # twice: nothing more
        from desktop_env.desktop_env import DesktopEnv
        from desktop_env.providers import create_vm_manager_and_provider
        env = DesktopEnv(provider_name="sandbox-desktop", screen_size=(640, 400))
        other = DesktopEnv(provider_name="sandbox-desktop", screen_size=(640, 400))
        print(json.dumps({"id": env.path_to_vm, "other": other.path_to_vm, "used": env.is_environment_used,
                          "ip": env.vm_ip, "ports": [env.server_port, env.chromium_port, env.vnc_port, env.vlc_port],
                          "vmware": list(create_vm_manager_and_provider("vmware", None))}))
        other.close()
    """)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    made = desktop(api, answer["id"])
    guest = made["osworld"]
    assert made["state"] == "active" and made["resolution"]["width"] == 640
    assert answer["used"] is False  # counted among the providers whose machines start clean
    assert answer["ip"] == "127.0.0.1"
    assert answer["ports"] == [guest["port"], guest["cdpPort"], int(srv.url.rsplit(":", 1)[1]), guest["vlcPort"]]
    assert httpx.get(f"http://{answer['ip']}:{answer['ports'][0]}/platform").text == "Linux"
    assert answer["vmware"] == ["vmware-manager", "vmware-provider"]  # the other names as they were
    assert desktop(api, answer["other"])["state"] == "deleted"  # close() deleted it
    api.delete(f"/v1/desktops/{answer['id']}")


def test_revert_recreates_or_resets(tmp_path: Path, srv: ServerProcess, api: httpx.Client) -> None:
    done = run_script(stand_in(tmp_path), srv, """
        from sandbox_desktop_client import osworld
        osworld.install(URL, token=TOKEN)
        from desktop_env.desktop_env import DesktopEnv
        env = DesktopEnv(provider_name="sandbox-desktop", screen_size=(640, 400))
        first = env.path_to_vm
        env._revert_to_snapshot()
        env._start_emulator()
        print(first, env.path_to_vm, env.server_port)
        osworld.install(URL, token=TOKEN, revert="reset")
        env._revert_to_snapshot()
        print(env.path_to_vm)
        env.close()
    """)
    assert done.returncode == 0, done.stderr
    first_line, second_line = done.stdout.splitlines()
    first, recreated, _ = first_line.split()
    assert recreated != first and desktop(api, first)["state"] == "deleted"
    assert second_line == recreated  # a reset keeps the desktop
    assert desktop(api, recreated)["state"] == "deleted"  # closed


@pytest.mark.parametrize(("version", "clean", "message"), [
    ("1.0.3", CLEAN_START, "desktop_env 1.0.3 is not one this provider was written for (1.0.2)"),
    ("1.0.2", '"docker", "aws"', "no single set of clean-start providers"),
])
def test_install_refuses_what_it_was_not_written_for(tmp_path: Path, srv: ServerProcess, version: str, clean: str,
                                                     message: str) -> None:
    done = run_script(stand_in(tmp_path, version, clean), srv, """
        from sandbox_desktop_client import osworld
        try:
            osworld.install(URL, token=TOKEN)
        except RuntimeError as exc:
            print(exc)
        from desktop_env.desktop_env import DesktopEnv
        try:
            DesktopEnv(provider_name="sandbox-desktop")
        except (NotImplementedError, ValueError) as exc:
            print("unpatched:", exc)
    """)
    assert done.returncode == 0, done.stderr
    assert message in done.stdout and "unpatched: sandbox-desktop not implemented!" in done.stdout


@pytest.fixture(scope="module")
def real_python() -> Path:
    """An interpreter with the real `desktop-env` 1.0.2: $OSWORLD_DESKTOP_ENV_PYTHON where given, else the venv
    tests/support/desktop_env_python.py builds once in the user's cache (desktop-env without torch, easyocr and
    transformers; an empty `easyocr` stands in, imported by the docs domain's OCR metric only, which these tasks
    never call)."""
    given = os.environ.get("OSWORLD_DESKTOP_ENV_PYTHON")
    return Path(given) if given else desktop_env_python()


def run_real(python: Path, tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`argv` under the real harness's interpreter. One given by $OSWORLD_DESKTOP_ENV_PYTHON may lack easyocr (it
    needs torch: gigabytes of CUDA wheels from PyPI): an empty module stands in for it, as in the built venv."""
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    if subprocess.run([python, "-c", "import easyocr"], capture_output=True).returncode != 0:
        (stubs / "easyocr.py").write_text(STAND_INS["easyocr"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "client"), str(stubs)])}
    return subprocess.run([str(python), *argv], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)


def test_real_desktop_env_runs_a_task(real_python: Path, tmp_path: Path, srv: ServerProcess,
                                      api: httpx.Client) -> None:
    done = run_real(real_python, tmp_path, str(REPO / "tests" / "support" / "osworld_task.py"), srv.url,
                    srv.token or "", str(tmp_path / "cache"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "scores 1.0 0.0"
    assert not [d for d in api.get("/v1/desktops").json()["desktops"] if d["id"] != "default"]


def test_the_parallel_example_runs_tasks_on_desktops_at_once(real_python: Path, tmp_path: Path, srv: ServerProcess,
                                                             api: httpx.Client) -> None:
    examples = tmp_path / "examples" / "os"
    examples.mkdir(parents=True)
    for n in range(3):  # each checks for a file its own setup wrote: a desktop shared by two tasks would fail one
        (examples / f"t{n}.json").write_text(json.dumps({
            "id": f"t{n}", "instruction": "Nothing to do.",
            "config": [{"type": "execute", "parameters": {"command": f"echo t{n} > /home/user/mine.txt",
                                                          "shell": True}}],
            "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": "cat ~/mine.txt",
                                                            "shell": True},
                          "expected": {"type": "rule", "rules": {"expected": f"t{n}\n"}}}}))
    out = tmp_path / "results.json"
    done = run_real(real_python, tmp_path, str(REPO / "examples" / "osworld_parallel.py"), "--server", srv.url,
                    f"--token={srv.token}", "--examples", str(tmp_path / "examples"), "--workers", "2",
                    "--size", "640x400", "--out", str(out))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert {task: r["score"] for task, r in results.items()} == {"t0": 1.0, "t1": 1.0, "t2": 1.0}, results
    assert not [d for d in api.get("/v1/desktops").json()["desktops"] if d["id"] != "default"]
