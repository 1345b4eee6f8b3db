"""Time from opening the inspector with `#live` to its first drawn frame, in a Chromium that UDP does not reach.

    .venv/bin/python bench/live_fallback.py [--rounds 3] [--size 1440x900]

One headless Chromium in a network namespace of its own (tests/support/browser.py), the server reached through a
forwarder on our end of the pair, as in tests/ui/test_live_fallback.py (whose helpers, tests/support/no_udp.py,
this shares). Each round opens a new tab on `/ui/#token=…&live` with the live view off, so the stream's start is
counted as for a first visitor, and reads the page's own clock: `window.inspector.live.timings.firstFrame` is
`performance.now()` when the first picture was drawn, i.e. milliseconds since the tab began loading the page.
- baseline: UDP passes, WebRTC connects (the same run, the same namespace);
- UDP dropped both ways (nftables), on the plain http:// page: WebRTC waits 2 s for ICE, then the page falls
  back to the WebSocket transport with JPEG pictures (no WebCodecs outside a secure context);
- UDP dropped, the origin treated as secure (a Chromium flag): the WebSocket with H.264 decoded by WebCodecs.
Target (issue "A live view that connects from anywhere"): at most 3 s from page open to the first drawn frame
where UDP is dropped.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import ServerProcess, launch_server
from tests.support.browser import Browser, Forwarder, PrivateNetwork
from tests.support.no_udp import drop_udp, open_inspector

TARGET_MS = 3000.0
FIRST_FRAME = "window.inspector?.live.timings.firstFrame"
STEPS = ("start", "offer", "socketOpen", "connected", "firstFrame")
"""The page's clock (ms since the tab began loading): the live view's connect began (the page's scripts ran), the
server's WebRTC offer arrived, the last viewer socket opened (the WebSocket transport's, after a fallback), the
connection carried media (WebRTC's ICE connected; on the socket, the first picture), the first picture was drawn."""
TRANSPORT = "document.getElementById('live-transport').dataset.transport"


def first_frames(server: ServerProcess, browser: Browser, page_url: str,
                 rounds: int) -> tuple[list[dict[str, float]], str]:
    """Each round's `STEPS` in ms since the page began loading, and the transport the page ended on."""
    rounds_seen, transport = [], ""
    with server.client() as api:
        for _ in range(rounds):
            api.post("/v1/desktop/stream/stop")  # a first visitor's cost: the stream starts with the page
            page = open_inspector(browser, page_url, server.token)
            try:
                page.wait_for(FIRST_FRAME, "the first drawn frame", 20)
                rounds_seen.append(dict(page.evaluate("window.inspector.live.timings")))
                transport = str(page.evaluate(TRANSPORT))
            finally:
                browser.devtools.call("Target.closeTarget", {"targetId": page.target})
    return rounds_seen, transport


def report(name: str, rounds: list[dict[str, float]], baseline: float | None, check: bool) -> float:
    """Print the first frame's median and worst, and the median of each step; returns the median."""
    times = [r["firstFrame"] for r in rounds]
    median = statistics.median(times)
    ratio = f"  ({median / baseline:.2f}x UDP passing)" if baseline else ""
    verdict = (f"  target ≤ {TARGET_MS / 1000:.0f} s: median {'meets' if median <= TARGET_MS else 'MISSES'} it, worst "
               f"{'meets' if max(times) <= TARGET_MS else 'misses'} it") if check else ""
    print(f"{name:<46} first frame median {median:6.0f} ms, max {max(times):6.0f} ms (n={len(times)}){ratio}{verdict}")
    steps = ", ".join(f"{step} {statistics.median(r.get(step, float('nan')) for r in rounds):.0f}" for step in STEPS)
    print(f"{'':<46} steps (median ms since page open): {steps}")
    return median


def run(rounds: int, width: int, height: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-fallback-") as tmp, PrivateNetwork.create() as net:
        server = launch_server(Path(tmp), "--allowed-host", net.outer)
        port = urlsplit(server.url).port
        assert port is not None
        forwarder = Forwarder(net.outer, ("127.0.0.1", port))
        host, fport = forwarder.address
        page_url = f"http://{host}:{fport}/ui/"
        try:
            with server.client() as api:
                api.post("/v1/desktop/start", json={"width": width, "height": height,
                                                    "streamVideoCodec": "h264"}).raise_for_status()
            print(f"\n== the inspector opened with #live, {width}x{height} H.264, {rounds} rounds each ==")
            browser = Browser.launch(netns=net.name)
            try:
                passing, mode = first_frames(server, browser, page_url, rounds)
                baseline = report(f"UDP passes ({mode})", passing, None, False)
                drop_udp(net)
                dropped, mode = first_frames(server, browser, page_url, rounds)
                report(f"UDP dropped, http:// page ({mode}, JPEG)", dropped, baseline, True)
            finally:
                browser.close()
            secure = Browser.launch(netns=net.name,
                                    extra=(f"--unsafely-treat-insecure-origin-as-secure={page_url[:-4]}",))
            try:
                webcodecs, mode = first_frames(server, secure, page_url, rounds)
                report(f"UDP dropped, secure origin ({mode}, H.264)", webcodecs, baseline, True)
            finally:
                secure.close()
        finally:
            forwarder.close()
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", default="1440x900")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    run(args.rounds, width, height)


if __name__ == "__main__":
    main()
