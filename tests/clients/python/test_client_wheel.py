"""The client distribution on its own: its wheel, built from client/, installed into a fresh venv with
nothing else, drives a running server; it brings httpx and pydantic and nothing of the server's stack."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, launch_server

HEAVY = ("Xlib", "mss", "PIL", "av", "aiortc", "starlette", "uvicorn", "api", "desktop", "streaming", "recording")
DRIVE = textwrap.dedent("""
    import json, sys
    from sandbox_desktop_client import Client, ApiError
    from sandbox_desktop_wire.desktops import DesktopResource

    url, token = sys.argv[1], sys.argv[2]
    with Client(url, token=token) as client:
        with client.desktops.create(tags={"from": "wheel"}, width=640, height=480) as desktop:
            shot = desktop.screenshot()
            position = desktop.click(10, 20)
            desktop.set_clipboard("from a fresh venv")
            clip = desktop.clipboard()
            listed = client.desktops.list(tags={"from": "wheel"})
        try:
            client.desktops.get("dsk_nosuch")
            missing = None
        except ApiError as error:
            missing = error.code
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
    print(json.dumps({"width": shot.screen_width, "click": [position.x, position.y], "clipboard": clip,
                      "listed": [d.id for d in listed], "resource": isinstance(listed[0], DesktopResource),
                      "missing": missing, "heavy": heavy}))
""")
CLOSURE = textwrap.dedent("""
    import json
    from importlib import metadata
    from pip._vendor.packaging.requirements import Requirement  # the venv has nothing else to read markers

    def name(text): return text.lower().replace("_", "-")
    def needed(req): return req.marker is None or req.marker.evaluate({"extra": ""})
    todo, seen = ["sandbox-desktop-client"], set()
    while todo:
        dist = todo.pop()
        if dist in seen: continue
        seen.add(dist)
        todo += [name(r.name) for r in map(Requirement, metadata.requires(dist) or []) if needed(r)]
    installed = {name(d.metadata["Name"]) for d in metadata.distributions()} - {"pip", "setuptools", "wheel"}
    print(json.dumps({"closure": sorted(seen), "installed": sorted(installed)}))
""")


def build_wheel(out: Path, source: Path = REPO / "client", name: str = "sandbox_desktop_client") -> Path:
    """The wheel of the distribution in `source` (the client by default, the server from REPO), without deps."""
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = out.glob(f"{name}-*.whl")
    return wheel


def fresh_venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=120)
    return where / "bin" / "python"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(tmp / "dist")
    python = fresh_venv(tmp / "venv")
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True,
                             timeout=600)
    assert install.returncode == 0, install.stderr
    return python


def test_the_wheel_holds_the_client_and_the_wire_models_typed(installed: Path) -> None:
    found = json.loads(subprocess.run([str(installed), "-c", CLOSURE], capture_output=True, text=True, check=True,
                                      timeout=60, cwd=installed.parent).stdout)  # not the checkout's metadata
    assert {"sandbox-desktop-client", "httpx", "pydantic"} <= set(found["installed"])
    # Nothing but the client, httpx, pydantic and what those two need (bench/client_wheel.py counts them).
    assert found["installed"] == found["closure"], found
    typed = subprocess.run([str(installed), "-c", "import importlib.resources as r; "
                            "print(all(r.files(p).joinpath('py.typed').is_file() "
                            "for p in ('sandbox_desktop_client', 'sandbox_desktop_wire')))"],
                           capture_output=True, text=True, check=True, timeout=60)
    assert typed.stdout.strip() == "True"


def test_the_installed_client_drives_a_server(installed: Path, tmp_path: Path) -> None:
    server = launch_server(tmp_path)
    try:
        script = f"HEAVY = {HEAVY!r}\n" + DRIVE
        ran = subprocess.run([str(installed), "-c", script, server.url, server.token or ""], capture_output=True,
                             text=True, timeout=120, cwd=tmp_path)  # not the checkout: only the venv's packages
        assert ran.returncode == 0, ran.stderr
        result = json.loads(ran.stdout)
    finally:
        server.stop()
    assert result["width"] == 640 and result["click"] == [10, 20]
    assert result["clipboard"] == "from a fresh venv" and len(result["listed"]) == 1 and result["resource"]
    assert result["missing"] == "desktop_not_found"
    assert result["heavy"] == [], f"the client imported the server's stack: {result['heavy']}"


def test_the_server_distribution_depends_on_the_client_one() -> None:
    import tomllib

    server = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    client = tomllib.loads((REPO / "client" / "pyproject.toml").read_text())["project"]
    assert f"{client['name']}=={client['version']}" in server["dependencies"]
    assert sorted(d.split(">")[0].split("=")[0] for d in client["dependencies"]) == ["httpx", "pydantic"]
