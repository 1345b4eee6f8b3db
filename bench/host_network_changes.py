"""What a browser on the server's machine loses when the host's network changes under it (docs/sandbox-network.md,
"How it is built"): a headless Chromium fetches from a loopback server, a new connection per fetch, while the
host's network is changed in one of these ways, and the bench counts the fetches that failed and why.

- `quiet`: nothing changes (the yardstick);
- `addresses`: an address added to a link and removed, over and over (what making and closing a desktop did
  when the host's end of its link had an address);
- `desktops`: a real `NetworkHub` making and closing desktops' networks, over and over (desktop/sandbox/slots.py:
  links and routes, no address).

Each mode runs `--fetches` fetches; the changes run until they end (at most `--seconds` s). Needs root, `ip`,
`nft` and Chromium; it changes only links named sdbench0/1, addresses of 10.254.0.0/16 and its own hub's.
Usage: sudo .venv/bin/python bench/host_network_changes.py [--fetches 3000] [--modes quiet,addresses,desktops]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import http.server
import re
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from desktop.sandbox.network import NetworkHub, NetworkRules
from tests.support.browser import Browser, chromium_path

MODES = ("quiet", "addresses", "desktops")


class Answer(http.server.BaseHTTPRequestHandler):
    """HTTP/1.0, so every fetch opens a connection: a change fails what is connecting, not what is connected."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.send_header("Access-Control-Allow-Origin", "*")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def serve() -> int:
    server = Server(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return int(server.server_address[1])


def ip(*lines: str) -> None:
    subprocess.run(["ip", "-force", "-batch", "-"], input="".join(f"{line}\n" for line in lines), text=True,
                   capture_output=True, timeout=30)


def churn_addresses(stop: threading.Event) -> int:
    ip("link add sdbench0 type veth peer name sdbench1", "link set sdbench0 up", "link set sdbench1 up")
    changes = 0
    try:
        while not stop.is_set():
            address = f"10.254.{changes // 2 % 250}.1/31"
            ip(f"addr add {address} dev sdbench0", f"addr del {address} dev sdbench0")
            changes += 2
    finally:
        ip("link del sdbench0")
    return changes


def churn_desktops(stop: threading.Event) -> int:
    async def run() -> int:
        hub = await NetworkHub.open([], pool_size=1)
        made = 0
        try:
            while not stop.is_set():
                network = await hub.create(f"bench{made}", NetworkRules())
                await network.close()
                made += 1
        finally:
            await hub.close()
        return made
    return asyncio.run(run())


CHURNS: dict[str, tuple[str, Callable[[threading.Event], int]] | None] = {
    "quiet": None, "addresses": ("address changes", churn_addresses),
    "desktops": ("desktops' networks", churn_desktops)}


def measure(browser: Browser, mode: str, fetches: int, seconds: float) -> None:
    page_port, target_port = serve(), serve()
    page = browser.new_page(f"http://127.0.0.1:{page_port}/")
    stop = threading.Event()
    churn = CHURNS[mode]
    done: list[int] = []
    worker = None
    if churn is not None:
        worker = threading.Thread(target=lambda: done.append(churn[1](stop)), daemon=True)
        worker.start()
        time.sleep(0.3)
    began = time.monotonic()
    failed = page.evaluate(f"""(async () => {{
        const failed = [];
        const until = performance.now() + {seconds * 1000};
        for (let i = 0; i < {fetches} && performance.now() < until; i++) {{
            try {{ await (await fetch('http://127.0.0.1:{target_port}/' + i, {{cache: 'no-store'}})).text(); }}
            catch (e) {{ failed.push(i); }}
        }}
        return failed;
    }})()""", timeout=seconds + 30)
    took = time.monotonic() - began
    stop.set()
    if worker is not None:
        worker.join(60)
    reasons = collections.Counter(m[1] for text in page.browser_log() if (m := re.search(r"net::(ERR_\w+)", text)))
    made = f", {done[0]} {churn[0]} meanwhile" if churn is not None and done else ""
    print(f"{mode:>10}: {len(failed)} of {fetches} fetches failed in {took:.1f} s{made}"
          f"{' (' + ', '.join(f'{n} {r}' for r, n in reasons.items()) + ')' if reasons else ''}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fetches", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=60.0, help="at most this long per mode")
    parser.add_argument("--modes", default="quiet,addresses,desktops")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if unknown := [m for m in modes if m not in MODES]:
        parser.error(f"--modes: {unknown} are not among {MODES}")
    if chromium_path() is None:
        sys.exit("chromium is not installed (apt-get install chromium)")
    browser = Browser.launch()
    try:
        for mode in modes:
            measure(browser, mode, args.fetches, args.seconds)
    finally:
        browser.close()


if __name__ == "__main__":
    main()
