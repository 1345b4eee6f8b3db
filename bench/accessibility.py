"""Benchmark the accessibility endpoints against the plain per-node AT-SPI walk, in the same run.

Starts a server and a desktop, opens Chromium (launched like any app: no accessibility flag) on a
generated page of about 1,000 accessible objects and GTK's widget factory, then times over one
persistent HTTP connection:
- the tree of the Chromium window (what shows, and with `includeHidden`: the whole page), `find` by
  role and name and by name alone, `act` by id (a focus), the tree of the focused GTK window;
- the baseline: the same page's objects read the plain way, one D-Bus call at a time per object
  (children, role, state, name), by this process on the desktop's accessibility bus;
- the accessibility bus's own cost on the idle desktop: RSS and CPU of its three daemons over 10 s;
- element waits: from the page adding a button (the `accessibility.changed` event's own timestamp, the
  server's monotonic clock, which is this machine's) to the wait's answer arriving here; and the server's
  CPU while waits for elements that never come are pending, on a quiet page and on one that keeps adding
  buttons, beside the same without waits.
Prints medians, p90s and the ratio to the walk.
Usage: .venv/bin/python bench/accessibility.py [--runs 10] [--waits 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import httpx

from bench.common import bench_desktop, cpu_seconds, rss_kib, summary, timed
from desktop.accessibility.atspi import ACCESSIBLE, AtspiBus, accessibility_bus_address
from tests.conftest import wait_for

ROWS = 110
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-sync", "--disable-component-update", "--test-type", "--window-position=0,0",
                 "--window-size=1000,860"]


def page(folder: Path) -> str:
    rows = "\n".join(f'<tr><td><a href="#r{i}">Item {i}</a></td><td><input aria-label="Quantity {i}" value="{i}">'
                     f'</td><td><button>Buy {i}</button></td></tr>' for i in range(ROWS))
    path = folder / "shop.html"
    path.write_text(f"<!doctype html><title>Shop</title><h1>Shop</h1><label>Name <input></label>"
                    f"<button>Save</button><button onclick='setTimeout(() => {{ let b = document.createElement("
                    f"\"button\"); b.textContent = \"New \" + (++window.added || (window.added = 1)); "
                    f"document.body.prepend(b) }}, 300)'>Add</button><table>{rows}</table>")
    return path.as_uri()


async def plain_walk(address: str, app_name: str) -> tuple[int, float]:
    """Every object of the application named `app_name`, one call at a time: (objects, seconds)."""
    bus = await AtspiBus.connect(await accessibility_bus_address(address))
    try:
        [apps] = await bus.call("org.a11y.atspi.Registry", "/org/a11y/atspi/accessible/root", ACCESSIBLE,
                                "GetChildren")
        started = time.perf_counter()
        for name, root in apps:
            if await bus.get_property(name, root, ACCESSIBLE, "Name") != app_name:
                continue
            count, stack = 0, [root]
            while stack:
                path = stack.pop()
                [children] = await bus.call(name, path, ACCESSIBLE, "GetChildren")
                await bus.call(name, path, ACCESSIBLE, "GetRole")
                await bus.call(name, path, ACCESSIBLE, "GetState")
                await bus.get_property(name, path, ACCESSIBLE, "Name")
                count += 1
                stack.extend(p for _b, p in children)
            return count, time.perf_counter() - started
        raise SystemExit(f"no application named {app_name}")
    finally:
        bus.disconnect()


def daemons(display: str) -> list[int]:
    """Pids of the accessibility bus's daemons (launcher, its dbus-daemon, the registry) of `display`."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            ours = f"DISPLAY={display}".encode() in env
            if ours and (b"at-spi-bus-launcher" in cmd or b"at-spi2-registryd" in cmd
                         or b"at-spi2/accessibility.conf" in cmd):
                found.append(int(pid))
    return found


def one_element_wait(api: httpx.Client, n: int) -> float | None:
    """Seconds from the event announcing button `New n` to the wait's answer here; None if either is missing."""
    answer: dict[str, Any] = {}
    events: list[dict[str, Any]] = []
    waiter = httpx.Client(base_url=str(api.base_url), headers=api.headers, timeout=30)
    listener = httpx.Client(base_url=str(api.base_url), headers=api.headers, timeout=30)

    def wait() -> None:
        body = {"element": {"role": "button", "name": f"New {n}"}, "timeoutMs": 5000}
        answer["body"] = waiter.post("/v1/desktop/wait", json=body).json()
        answer["at"] = time.monotonic()

    def listen() -> None:
        with contextlib.suppress(httpx.HTTPError), listener.stream(
                "GET", "/v1/desktop/events", params={"types": "accessibility.changed"}) as response:
            for line in response.iter_lines():  # ends at the first event after the answer, or when closed
                if line.startswith("data:"):
                    events.append(json.loads(line[5:]))
                if "at" in answer:
                    return

    threads = [threading.Thread(target=wait, daemon=True), threading.Thread(target=listen, daemon=True)]
    try:
        for thread in threads:
            thread.start()
        time.sleep(0.3)  # both pending
        clicked = time.monotonic()
        api.post("/v1/desktop/accessibility/act", json={"element": {"role": "button", "name": "Add"},
                                                         "action": "invoke"})
        threads[0].join(10)
        threads[1].join(5)  # ends with the next event after the answer (the listener may linger on a quiet page)
    finally:
        waiter.close()
        listener.close()
    added = [e["t"] for e in events if "children-changed:add" in e.get("change", "") and e["t"] > clicked + 0.25]
    if not answer.get("body", {}).get("matched") or not added:
        return None
    return float(answer["at"] - min(added))


def element_wait_latency(api: httpx.Client, runs: int) -> None:
    """The wait's answer after the event announcing the new button (same clock), over `runs` buttons."""
    results = [one_element_wait(api, n) for n in range(1, runs + 1)]
    latencies = [r for r in results if r is not None]
    if latencies:
        summary("element wait: page adds a button -> wait answers", latencies)
    if len(latencies) < runs:
        print(f"  ({runs - len(latencies)} of {runs} runs without a match or without its event)")


SETTLE_S = 3.0
"""Time given pending waits to make their first check (a whole `find` each) before their CPU is counted."""


def server_cpu(server_pid: int, seconds: float, during: Callable[[float], None] = time.sleep) -> float:
    """Percent of a core the server used while `during(seconds)` ran."""
    before, start = cpu_seconds(server_pid), time.monotonic()
    during(seconds)
    return (cpu_seconds(server_pid) - before) / (time.monotonic() - start) * 100


def page_churn(api: httpx.Client) -> Callable[[float], None]:
    """For `seconds`: the page adds a button every 100 ms (none of them waited for)."""
    def churn(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            api.post("/v1/desktop/accessibility/act", json={"element": {"role": "button", "name": "Add"},
                                                             "action": "invoke"})
            time.sleep(0.1)
    return churn


def pending_element_waits_cpu(api: httpx.Client, server_pid: int, pending: int, seconds: float) -> None:
    """Server CPU while `pending` element waits that never match are pending (from SETTLE_S after they were
    sent, once each made its first check), on a quiet page and while the page keeps changing, beside the
    same without waits."""
    churn = page_churn(api)
    idle, changing = server_cpu(server_pid, seconds), server_cpu(server_pid, seconds, churn)
    timeout_ms = int((SETTLE_S + 2 * seconds + 5) * 1000)
    threads = [threading.Thread(target=lambda: httpx.post(
        f"{api.base_url}/v1/desktop/wait", headers=api.headers, timeout=timeout_ms / 1000 + 30,
        json={"element": {"name": "never there"}, "timeoutMs": timeout_ms}), daemon=True) for _ in range(pending)]
    for thread in threads:
        thread.start()
    time.sleep(SETTLE_S)
    quiet, busy = server_cpu(server_pid, seconds), server_cpu(server_pid, seconds, churn)
    for thread in threads:
        thread.join(timeout_ms / 1000 + 30)
    print(f"server CPU, % of a core over {seconds:.0f} s: quiet page {idle:.2f} without waits, {quiet:.2f} with "
          f"{pending} element waits pending (+{quiet - idle:.2f}); page adding a button every 100 ms "
          f"{changing:.2f} without waits, {busy:.2f} with them (+{busy - changing:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--waits", type=int, default=10, help="element waits timed")
    args = parser.parse_args()
    with bench_desktop("a11y", 241, width=1440, height=900, terminals=0, images=0) as bench:
        api = bench.api
        folder = Path(tempfile.mkdtemp(prefix="page-", dir=bench.tmp))
        folder.chmod(0o777)  # the desktop's own user writes Chromium's profile here
        idle_pids = daemons(bench.display)
        before, start = sum(map(cpu_seconds, idle_pids)), time.monotonic()
        time.sleep(10)
        idle_cpu = (sum(map(cpu_seconds, idle_pids)) - before) / (time.monotonic() - start)
        print(f"accessibility bus on the idle desktop: {len(idle_pids)} daemons, "
              f"RSS {sum(map(rss_kib, idle_pids)) / 1024:.1f} MiB, CPU {idle_cpu * 100:.2f} % of a core over 10 s\n")
        chromium = api.post("/v1/desktop/launch", json={
            "app": "chromium", "wait": True, "waitTimeoutMs": 30000,
            "args": [*CHROMIUM_ARGS, f"--user-data-dir={folder / 'profile'}", page(folder)]}).json()
        gtk = api.post("/v1/desktop/launch", json={"app": "gtk3-widget-factory", "wait": True}).json()
        api.post(f"/v1/desktop/windows/{chromium['windowId']}/focus")
        wait_for(lambda: api.post("/v1/desktop/accessibility/find", json={"role": "button", "name": "Save"}
                                  ).json()["elements"], "the page's Save button")
        whole = api.get("/v1/desktop/accessibility/tree", params={"window": chromium["windowId"],
                                                                    "includeHidden": "true"}).json()["count"]
        showing = api.get("/v1/desktop/accessibility/tree", params={"window": chromium["windowId"]}).json()["count"]
        print(f"Chromium page: {whole} objects in its window, {showing} of them showing\n")
        address = api.post("/v1/processes/run", json={"command": "printenv", "args": ["DBUS_SESSION_BUS_ADDRESS"]}
                           ).json()["stdout"].strip()
        walks = [asyncio.run(plain_walk(address, "Chromium")) for _ in range(2)]
        walked = min(seconds for _count, seconds in walks)
        summary(f"plain per-node walk, one call at a time ({walks[0][0]} objects)", [s for _c, s in walks])
        runs = args.runs
        tree = summary("GET tree, Chromium window (showing)", timed(lambda: api.get(
            "/v1/desktop/accessibility/tree", params={"window": chromium["windowId"]}), runs), walked, "walk")
        summary("GET tree, Chromium window (includeHidden: the whole page)", timed(lambda: api.get(
            "/v1/desktop/accessibility/tree", params={"window": chromium["windowId"], "includeHidden": "true"}),
            runs), walked, "walk")
        summary("POST find role=button name='Buy 7'", timed(lambda: api.post(
            "/v1/desktop/accessibility/find", json={"role": "button", "name": "Buy 7"}), runs), walked, "walk")
        summary("POST find name='Item 3' (no role)", timed(lambda: api.post(
            "/v1/desktop/accessibility/find", json={"name": "Item 3"}), runs), walked, "walk")
        field = api.post("/v1/desktop/accessibility/find", json={"name": "Quantity 2"}).json()["elements"][0]["id"]
        summary("POST act focus by id", timed(lambda: api.post(
            "/v1/desktop/accessibility/act", json={"element": field, "action": "focus"}), runs), walked, "walk")
        api.post(f"/v1/desktop/windows/{gtk['windowId']}/focus")
        summary("GET tree, focused GTK window (widget factory)", timed(lambda: api.get(
            "/v1/desktop/accessibility/tree", params={"window": "focused"}), runs), walked, "walk")
        print(f"\ntree of the page {walked / tree:.1f}x faster than the per-node walk\n")
        api.post(f"/v1/desktop/windows/{chromium['windowId']}/focus")
        element_wait_latency(api, args.waits)
        pending_element_waits_cpu(api, bench.server.proc.pid, 5, 10)


if __name__ == "__main__":
    main()
