"""Benchmark the accessibility endpoints against the plain per-node AT-SPI walk, in the same run.

Starts a server and a desktop, opens Chromium (launched like any app: no accessibility flag) on a
generated page of about 1,000 accessible objects and GTK's widget factory, then times over one
persistent HTTP connection:
- the tree of the Chromium window (what shows, and with `includeHidden`: the whole page), `find` by
  role and name and by name alone, `act` by id (a focus), the tree of the focused GTK window;
- the baseline: the same page's objects read the plain way, one D-Bus call at a time per object
  (children, role, state, name), by this process on the desktop's accessibility bus;
- the accessibility bus's own cost on the idle desktop: RSS and CPU of its three daemons over 10 s.
Prints medians, p90s and the ratio to the walk. Usage: .venv/bin/python bench/accessibility.py [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_desktop, summary, timed
from desktop.accessibility.atspi import ACCESSIBLE, AtspiBus, accessibility_bus_address

ROWS = 110
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-sync", "--disable-component-update", "--test-type", "--window-position=0,0",
                 "--window-size=1000,860"]


def page(folder: Path) -> str:
    rows = "\n".join(f'<tr><td><a href="#r{i}">Item {i}</a></td><td><input aria-label="Quantity {i}" value="{i}">'
                     f'</td><td><button>Buy {i}</button></td></tr>' for i in range(ROWS))
    path = folder / "shop.html"
    path.write_text(f"<!doctype html><title>Shop</title><h1>Shop</h1><label>Name <input></label>"
                    f"<button>Save</button><table>{rows}</table>")
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


def cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total


def rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def wait_for(check: Any, what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with bench_desktop("a11y", 241, width=1440, height=900, terminals=0, images=0) as bench:
        api = bench.api
        folder = Path(tempfile.mkdtemp(prefix="bench-a11y-page-"))
        idle_pids = daemons(bench.display)
        before, start = cpu_ticks(idle_pids), time.monotonic()
        time.sleep(10)
        idle_cpu = (cpu_ticks(idle_pids) - before) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - start)
        print(f"accessibility bus on the idle desktop: {len(idle_pids)} daemons, "
              f"RSS {rss_kib(idle_pids) / 1024:.1f} MiB, CPU {idle_cpu * 100:.2f} % of a core over 10 s\n")
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
        print(f"\ntree of the page {walked / tree:.1f}x faster than the per-node walk")


if __name__ == "__main__":
    main()
