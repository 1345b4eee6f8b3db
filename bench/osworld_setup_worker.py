"""The half of bench/osworld_tasks.py that runs under an interpreter with OSWorld's real harness (`desktop-env`
1.0.2; tests/support/desktop_env_python.py): each task's `config` through desktop_env's own SetupController
against a desktop's guest API, as `DesktopEnv.reset` runs it, several desktops at once.

Reads a JSON job on stdin: `{"server", "token", "cache", "desktops": [{"id", "ip", "port", "cdp", "vlc", "width",
"height"}], "tasks": [{"id", "domain", "config"}], "timeout"}`; prints one JSON line per task: `{"id", "domain",
"ok", "step", "type", "error", "exits", "seconds"}` (`exits`: the setup commands that exited non-zero, and the
apps it launched that are gone with a non-zero status).

Faithful to DesktopEnv.reset where it matters: the desktop is reset first (apps ended, HOME from its template;
the provider's `revert="reset"`), the controller is desktop_env's, its steps are called in order by the same
`_<type>_setup` names `SetupController.setup` calls. Stricter in one way: upstream's controller logs and carries on
when the guest answers an error to `/setup/launch` or `/setup/execute`; here any guest answer of 400 or more during
a step fails that step (else a task whose app never started would count as set up). A setup command that exits
non-zero is an answer, not an error, to upstream's controller too: it is noted apart (`exits`)."""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from typing import Any

import requests
from desktop_env.controllers.setup import SetupController

REQUEST_CAP_S = 120.0  # upstream waits up to 1810 s for /setup/open_file's window; a task fails sooner here
LAUNCH_GRACE_S = 2.0
seen = threading.local()  # what went wrong in the step the thread runs: `errors` and non-zero `exits`
_send = requests.Session.send


def send(self: requests.Session, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
    """Every request the controller makes, capped in time, its guest errors and non-zero exits noted."""
    kwargs["timeout"] = min(kwargs.get("timeout") or REQUEST_CAP_S, REQUEST_CAP_S)
    response = _send(self, request, **kwargs)
    if getattr(seen, "errors", None) is None:
        return response
    path = (request.path_url or "").split("?")[0]
    if response.status_code >= 400:
        seen.errors.append(f"{path} answered {response.status_code}: {response.text[:300]}")
    elif path.endswith("/execute") and response.headers.get("content-type", "").startswith("application/json"):
        body = response.json()
        if isinstance(body, dict) and body.get("returncode") not in (0, None):
            said = str(body.get("error") or body.get("output") or "").strip().splitlines()
            seen.exits.append(f"{path} exited {body['returncode']}: {said[-1][:300] if said else ''}")
    return response


requests.Session.send = send  # type: ignore[method-assign]


def ready(guest: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            if requests.get(guest + "/screenshot", timeout=10).content.startswith(b"\x89PNG"):
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise RuntimeError("the guest did not answer /screenshot after the reset")


def launched_and_gone(job: dict[str, Any], desktop: dict[str, Any], since_ms: int) -> list[str]:
    """The apps the task's setup started in the background (`launch`, `open`) that have already exited non-zero,
    after a moment to crash in: the guest answered that they launched, but the task will not find them."""
    time.sleep(LAUNCH_GRACE_S)
    listed = requests.get(f"{job['server']}/v1/desktops/{desktop['id']}/processes", timeout=30,
                          headers={"Authorization": f"Bearer {job['token']}"})
    listed.raise_for_status()
    return [f"launched {' '.join([p['command'], *p['args']])[:120]} exited {p['exitCode']}"
            for p in listed.json()["processes"]
            if p["createdAtMs"] >= since_ms and p.get("exitCode") not in (None, 0)]


def run_task(job: dict[str, Any], desktop: dict[str, Any], task: dict[str, Any]) -> dict[str, Any]:
    began, started_ms = time.monotonic(), time.time_ns() // 1_000_000
    result: dict[str, Any] = {"id": task["id"], "domain": task["domain"], "ok": False, "step": 0, "type": "reset",
                              "error": "", "exits": []}
    try:
        requests.post(f"{job['server']}/v1/desktops/{desktop['id']}/reset", timeout=REQUEST_CAP_S,
                      headers={"Authorization": f"Bearer {job['token']}"}).raise_for_status()
        ready(f"http://{desktop['ip']}:{desktop['port']}", time.monotonic() + 60)
        controller = SetupController(vm_ip=desktop["ip"], server_port=desktop["port"], chromium_port=desktop["cdp"],
                                     vlc_port=desktop["vlc"], cache_dir=job["cache"], screen_width=desktop["width"],
                                     screen_height=desktop["height"])
        if not controller.setup([]):  # its connection check, as setup() makes it before the steps
            raise RuntimeError("the guest did not answer /terminal")
        for index, step in enumerate(task["config"], 1):
            result.update(step=index, type=step["type"])
            seen.errors, seen.exits = [], []
            getattr(controller, f"_{step['type']}_setup")(**step.get("parameters", {}))
            if seen.errors:
                raise RuntimeError("; ".join(seen.errors))
            result["exits"] += [f"step {index} ({step['type']}) {note}" for note in seen.exits]
        result["exits"] += launched_and_gone(job, desktop, started_ms)
        result.update(ok=True, step=0, type="")
    except Exception as exc:  # the task's failure is the figure, whatever raised it
        result["error"] = f"{type(exc).__name__}: {exc}"[:600]
    finally:
        seen.errors = seen.exits = None
    result["seconds"] = round(time.monotonic() - began, 2)
    return result


def main() -> None:
    job = json.load(sys.stdin)
    tasks: queue.Queue[dict[str, Any]] = queue.Queue()
    for task in job["tasks"]:
        tasks.put(task)
    printing = threading.Lock()

    def worker(desktop: dict[str, Any]) -> None:
        while True:
            try:
                task = tasks.get_nowait()
            except queue.Empty:
                return
            line = json.dumps(run_task(job, desktop, task))
            with printing:
                print(line, flush=True)

    threads = [threading.Thread(target=worker, args=(d,), daemon=True) for d in job["desktops"]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(job["timeout"])


if __name__ == "__main__":
    main()
