"""OSWorld on desktops of one server: how soon a desktop is ready for a task, and many tasks' setups at once.

Issue targets (docs/osworld.md): an OSWorld-ready desktop from create to a passing `/screenshot` <= 1 s, a
reset between tasks <= 1 s; `/accessibility` of a Chromium page <= 300 ms; 8 tasks' setup in parallel on a
2-core host, none failing for lack of resources.

1. create to ready: `POST /v1/desktops {"osworld": true}`, then the guest's `GET /screenshot` until it answers a
   PNG (timed from the create); baseline in the same run: the same create without the guest API.
2. reset to ready: `POST /v1/desktops/{id}/reset` (apps ended, HOME restored), then `/screenshot` again.
3. `/accessibility` of a Chromium page with a form (skipped without Chromium), and beside it the walk the
   upstream guest does (pyatspi, the same reads per object: states, attributes, extents of what shows, text,
   image, selection, value, actions, role, children), run in the desktop through `/run_python` and timed
   around the walk alone (skipped without python3-pyatspi).
4. N desktops at once, each running a task's typical setup through its own guest: `/setup/launch` of an
   xterm, `/setup/execute` of a shell command writing a file, `/file` reading it back, `/screenshot`;
   prints each phase's wall time and the failures (0 expected).

Usage: .venv/bin/python bench/osworld.py [--rounds 6] [--parallel 8]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import summary
from tests.conftest import launch_server

SIZE = {"width": 1280, "height": 800}
PNG = b"\x89PNG"
READY_TIMEOUT_S = 30.0
FORM = ("<!doctype html><title>Form</title><h1>Sign up</h1><form>" +
        "".join(f"<label>Field {i} <input name=f{i}></label><br>" for i in range(20)) +
        "<button>Send</button></form>")


PYATSPI_WALK = r"""
import json, time
import pyatspi

def node(acc, depth=0):
    count = 1
    states = acc.getState().get_states()
    acc.get_attributes()
    names = {pyatspi.StateType._enum_lookup[s] for s in states}
    if "STATE_VISIBLE" in names and "STATE_SHOWING" in names:
        try:
            acc.queryComponent().getExtents(pyatspi.XY_SCREEN)
        except NotImplementedError:
            pass
    try:
        text = acc.queryText()
        text.getText(0, text.characterCount)
    except NotImplementedError:
        pass
    for query in (acc.queryImage, acc.querySelection):
        try:
            query()
        except NotImplementedError:
            pass
    try:
        value = acc.queryValue()
        for read in ("currentValue", "minimumValue", "maximumValue", "minimumIncrement"):
            try:
                getattr(value, read)
            except Exception:
                pass
    except NotImplementedError:
        pass
    try:
        action = acc.queryAction()
        for i in range(action.nActions):
            (action.getName(i), action.getDescription(i), action.getKeyBinding(i))
    except NotImplementedError:
        pass
    acc.getRoleName()
    if depth < 50:
        try:
            for i, child in enumerate(acc):
                if i == 1024:
                    break
                count += node(child, depth + 1)
        except Exception:
            pass
    return count

desktop = pyatspi.Registry.getDesktop(0)
began = time.perf_counter()
nodes = node(desktop)
print(json.dumps({"ms": (time.perf_counter() - began) * 1000, "nodes": nodes}))
"""
"""The upstream guest's walk, per object the same reads (its `_create_atspi_node`), without building XML."""


def wait_screenshot(guest: httpx.Client, began: float) -> float:
    """Seconds from `began` until the guest's /screenshot answers a PNG."""
    deadline = began + READY_TIMEOUT_S
    while time.perf_counter() < deadline:
        try:
            shot = guest.get("/screenshot")
            if shot.status_code == 200 and shot.content.startswith(PNG):
                return time.perf_counter() - began
        except httpx.TransportError:
            pass
        time.sleep(0.005)
    raise SystemExit(f"the guest did not answer /screenshot within {READY_TIMEOUT_S:.0f} s")


def create(api: httpx.Client, **extra: Any) -> dict[str, Any]:
    made = api.post("/v1/desktops", json={**SIZE, **extra})
    if made.status_code != 201:
        raise SystemExit(f"create failed: {made.status_code} {made.text}")
    body: dict[str, Any] = made.json()
    return body


def readiness(api: httpx.Client, rounds: int) -> None:
    print(f"\n1-2. create and reset to a passing /screenshot ({rounds} rounds, alternating with a plain create)")
    found: dict[str, list[float]] = {"create (no guest API), to active": [], "create with osworld, to /screenshot": [],
                                     "reset, to /screenshot": []}
    for _ in range(rounds):
        began = time.perf_counter()
        plain = create(api)
        found["create (no guest API), to active"].append(time.perf_counter() - began)
        api.delete(f"/v1/desktops/{plain['id']}")
        began = time.perf_counter()
        made = create(api, osworld=True)
        with httpx.Client(base_url=made["osworld"]["url"], timeout=30) as guest:
            found["create with osworld, to /screenshot"].append(wait_screenshot(guest, began))
            began = time.perf_counter()
            api.post(f"/v1/desktops/{made['id']}/reset").raise_for_status()
            found["reset, to /screenshot"].append(wait_screenshot(guest, began))
        api.delete(f"/v1/desktops/{made['id']}")
    for name, samples in found.items():
        summary(f"  {name}", samples)


def accessibility(api: httpx.Client, shared: Path, rounds: int) -> None:
    if shutil.which("chromium") is None:
        print("\n3. /accessibility: chromium is not installed; skipped")
        return
    page = shared / "form.html"
    page.write_text(FORM)
    made = create(api, osworld=True)
    try:
        with httpx.Client(base_url=made["osworld"]["url"], timeout=60) as guest:
            guest.post("/setup/launch", json={"command": ["chromium", "--no-sandbox", "--no-first-run",
                                                          page.as_uri()]}).raise_for_status()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and b"Field 19" not in guest.get("/accessibility").content:
                time.sleep(0.5)
            samples, size = [], 0
            for _ in range(rounds):
                began = time.perf_counter()
                tree = guest.get("/accessibility")
                samples.append(time.perf_counter() - began)
                size = len(tree.content)
            print(f"\n3. /accessibility of a Chromium page with a 20-field form ({size} bytes of XML)")
            summary("  GET /accessibility", samples)
            upstream_walk(guest, rounds)
    finally:
        api.delete(f"/v1/desktops/{made['id']}")


def upstream_walk(guest: httpx.Client, rounds: int) -> None:
    walks, nodes = [], 0
    for _ in range(rounds):
        done = guest.post("/run_python", json={"code": PYATSPI_WALK}).json()
        if done.get("status") != "success":
            print(f"  the upstream walk (pyatspi) did not run: {str(done.get('error'))[-200:]}; "
                  "apt-get install python3-pyatspi")
            return
        found = json.loads(done["output"].strip().splitlines()[-1])
        walks.append(found["ms"] / 1000)
        nodes = found["nodes"]
    summary(f"  upstream's pyatspi walk of the same desktop ({nodes} objects, walk alone)", walks)


def one_task(api: httpx.Client, shared: Path, index: int) -> dict[str, float]:
    """A task's setup through its desktop's guest; the seconds of each phase."""
    phases: dict[str, float] = {}
    began = time.perf_counter()
    made = create(api, osworld=True)
    try:
        with httpx.Client(base_url=made["osworld"]["url"], timeout=60) as guest:
            phases["ready"] = wait_screenshot(guest, began)
            mark = time.perf_counter()
            guest.post("/setup/launch", json={"command": ["xterm"]}).raise_for_status()
            written = guest.post("/setup/execute", json={"command": f"echo task {index} > ~/task.txt", "shell": True})
            written.raise_for_status()
            read = guest.post("/file", data={"file_path": "~/task.txt"})
            if read.status_code != 200 or read.content.strip() != f"task {index}".encode():
                raise RuntimeError(f"desktop {index} read back {read.status_code} {read.content[:80]!r}")
            guest.get("/screenshot").raise_for_status()
            phases["setup"] = time.perf_counter() - mark
    finally:
        api.delete(f"/v1/desktops/{made['id']}")
    return phases


def parallel(api: httpx.Client, shared: Path, count: int) -> None:
    print(f"\n4. {count} tasks' setup at once, each in its own desktop through its own guest")
    began = time.perf_counter()
    with ThreadPoolExecutor(count) as pool:
        futures = [pool.submit(one_task, api, shared, i) for i in range(count)]
    wall = time.perf_counter() - began
    failures = [f.exception() for f in futures if f.exception() is not None]
    done = [f.result() for f in futures if f.exception() is None]
    for phase in ("ready", "setup"):
        if done:
            summary(f"  {phase} (each task)", [d[phase] for d in done])
    print(f"  all {count}: {wall:.2f} s wall, {len(failures)} failed")
    for failure in failures:
        print(f"    {failure!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6, help="creates and resets timed, and /accessibility calls")
    parser.add_argument("--parallel", type=int, default=8, help="tasks set up at once")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-osworld-") as tmp:
        shared = Path(tmp)
        shared.chmod(0o755)  # shared with the desktops (`--share`): a sandboxed desktop sees its own /tmp
        server = launch_server(shared / "server", "--share", str(shared), "--max-desktops", str(args.parallel + 2))
        try:
            with server.client(timeout=120) as api:
                readiness(api, args.rounds)
                accessibility(api, shared, args.rounds)
                parallel(api, shared, args.parallel)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
