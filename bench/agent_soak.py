"""Agent-loop soak: computer-use turns for 10 minutes against an xterm and a Tk app; nothing may drift or leak.

Turns rotate through the three ways an agent drives the desktop: Anthropic tool calls (left_click, type,
scroll, key, screenshot; one request each), an OpenAI computer_call batch, and a `POST /v1/desktop/actions`
batch with settle and screenshot (bench/agent_loop.py's step). Every minute prints the turns, errors,
request latency p50/p90/p99 (settle included) and the server's RSS, fds, threads and children; then the
drift from the first minute to the last. The Tk app's own log must show every button click and text sent.
Exits 1 on any error, RSS growth of --max-rss-growth-mb or more after minute 1 (which fills the screenshot
memory Pillow keeps, up to 32 MB by design: desktop/screen/screenshots.py), more fds, threads or children at the end
than after the warm-up, or a p50 that grew more than --max-latency-drift times.
Usage: .venv/bin/python bench/agent_soak.py [--minutes 10] [--quiet-ms 100]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import io
import json
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.agent_loop import SCREENSHOT
from bench.common import BenchDesktop, bench_desktop, percentile, summary
from bench.soak import ProcessStats, Soak, child_names, process_stats, settled_stats
from tests.conftest import REPO, ServerProcess, wait_for

SCREEN = (1440, 900)
CLAUDE = (1024, 640)  # a display size with the screen's aspect ratio (docs/vendors.md)
GPT = (1280, 800)
TOOL = {"type": "computer_20251124", "name": "computer", "display_width_px": CLAUDE[0],
        "display_height_px": CLAUDE[1]}
WARM_UP_TURNS = 6
WARM_UP_BURST = 8  # concurrent screenshot clients in the warm-up
MAX_TURNS = 100_000  # a bound besides the clock
TEXT = "héllo wörld"
BUTTONS = ("one", "two")


def to_model(point: tuple[int, int], size: tuple[int, int]) -> list[int]:
    """Screen pixels -> the model's image pixels, as docs/actions.md maps them."""
    return [(2 * point[0] + 1) * size[0] // (2 * SCREEN[0]), (2 * point[1] + 1) * size[1] // (2 * SCREEN[1])]


@dataclass
class Targets:
    """Where the agent points, in screen pixels: inside the xterm, the Tk app's entry and buttons."""

    xterm: tuple[int, int]
    entry: tuple[int, int]
    buttons: dict[str, tuple[int, int]]


@dataclass
class Minute:
    """One minute of the soak: latencies of every request, failures, and the server at its end."""

    turns: int = 0
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    by_kind: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    stats: ProcessStats | None = None


def png_error(data: str, size: tuple[int, int]) -> str | None:
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    return None if (image.format, image.size) == ("PNG", size) else f"{image.format} {image.size}, expected {size}"


class Agent:
    """Runs turns against the server and books every request into the current minute."""

    def __init__(self, api: httpx.Client, targets: Targets, quiet_ms: int) -> None:
        self.api, self.targets = api, targets
        self.settle = {"quietMs": quiet_ms, "timeoutMs": 3000}
        self.minute = Minute()
        self.clicks: list[str] = []  # the Tk buttons clicked, in order
        self.entries = 0  # times TEXT was typed into the Tk entry (and cleared)

    def call(self, kind: str, body: dict[str, Any], path: str) -> dict[str, Any] | None:
        started = time.perf_counter()
        try:
            response = self.api.post(path, json=body)
        except httpx.HTTPError as exc:
            self.minute.errors.append(f"{kind}: {type(exc).__name__}: {exc}")
            return None
        elapsed = time.perf_counter() - started
        self.minute.latencies.append(elapsed)
        self.minute.by_kind[kind].append(elapsed)
        if response.status_code != 200:
            self.minute.errors.append(f"{kind}: {response.status_code} {response.text[:300]}")
            return None
        return dict(response.json())

    def claude(self, action: dict[str, Any]) -> None:
        """One tool_use input; every answer but cursor_position is a PNG of the display size."""
        answer = self.call(f"anthropic {action['action']}", {"tool": TOOL, "input": action, "settle": self.settle},
                           "/v1/desktop/anthropic/computer")
        if answer is None:
            return
        block = answer["content"][0]
        problem = "is_error" if answer.get("is_error") else None
        problem = problem or (png_error(block["source"]["data"], CLAUDE) if block["type"] == "image" else "no image")
        if problem:
            self.minute.errors.append(f"anthropic {action}: {problem}: {json.dumps(answer)[:300]}")

    def anthropic_turn(self, n: int) -> None:
        t = self.targets
        button = BUTTONS[n % 2]
        for action in ({"action": "left_click", "coordinate": to_model(t.xterm, CLAUDE)},
                       {"action": "type", "text": f"echo turn {n}\n"},
                       {"action": "scroll", "coordinate": to_model(t.xterm, CLAUDE), "scroll_direction": "up",
                        "scroll_amount": 3},
                       {"action": "left_click", "coordinate": to_model(t.buttons[button], CLAUDE)},
                       {"action": "left_click", "coordinate": to_model(t.entry, CLAUDE)},
                       {"action": "type", "text": TEXT},
                       {"action": "key", "text": "ctrl+slash BackSpace"},  # Tk's select-all, then clear
                       {"action": "screenshot"}):
            self.claude(action)
        self.clicks.append(button)
        self.entries += 1

    def openai_turn(self, n: int) -> None:
        t = self.targets
        button = BUTTONS[n % 2]

        def click(point: tuple[int, int]) -> dict[str, Any]:
            x, y = to_model(point, GPT)
            return {"type": "click", "button": "left", "x": x, "y": y}

        x, y = to_model(t.xterm, GPT)
        actions = [click(t.xterm), {"type": "type", "text": f"echo turn {n}"}, {"type": "keypress", "keys": ["ENTER"]},
                   {"type": "scroll", "x": x, "y": y, "scroll_x": 0, "scroll_y": 300}, click(t.buttons[button]),
                   click(t.entry), {"type": "type", "text": TEXT}, {"type": "keypress", "keys": ["CTRL", "/"]},
                   {"type": "keypress", "keys": ["BACKSPACE"]}]
        answer = self.call("openai batch", {"display_width": GPT[0], "display_height": GPT[1], "settle": self.settle,
                                            "call": {"type": "computer_call", "call_id": f"call_{n}",
                                                     "actions": actions}}, "/v1/desktop/openai/computer")
        if answer is not None:
            url = answer["output"]["image_url"]
            if problem := png_error(url.removeprefix("data:image/png;base64,"), GPT):
                self.minute.errors.append(f"openai batch: {problem}")
        self.clicks.append(button)
        self.entries += 1

    def actions_turn(self, n: int) -> None:
        t = self.targets
        button = BUTTONS[n % 2]
        answer = self.call("actions batch", {
            "actions": [{"type": "click", "x": t.xterm[0], "y": t.xterm[1]},
                        {"type": "type", "text": f"echo turn {n}\n", "delayMs": 0},
                        {"type": "click", "x": t.buttons[button][0], "y": t.buttons[button][1]}],
            "settle": self.settle, "screenshot": SCREENSHOT}, "/v1/desktop/actions")
        if answer is not None and answer.get("settled") is None:
            self.minute.errors.append(f"actions batch: no settle result: {json.dumps(answer)[:300]}")
        self.clicks.append(button)

    def turn(self, n: int) -> None:
        (self.anthropic_turn, self.openai_turn, self.actions_turn)[n % 3](n)
        self.minute.turns += 1


def open_apps(bench: BenchDesktop) -> tuple[list[subprocess.Popen[bytes]], Path, Targets]:
    """An xterm (launched through the API) and tests/support/tkapp.py; where to click in each."""
    api = bench.api
    launched = api.post("/v1/desktop/launch", json={"app": "xterm", "args": ["-T", "soak-xterm", "-geometry",
                                                                            "80x24+60+150"], "wait": True})
    launched.raise_for_status()
    log = bench.tmp / "tkapp.jsonl"
    tk = subprocess.Popen([sys.executable, "-m", "tests.support.tkapp", "--out", str(log),
                           "--geometry", "600x400+800+430"],
                          cwd=REPO, env=bench.env)

    def window(title: str) -> dict[str, Any] | None:
        return next((w for w in api.get("/v1/desktop/windows").json()["windows"] if w["title"] == title), None)

    xterm, app = wait_for(lambda: window("soak-xterm"), "the xterm"), wait_for(lambda: window("tkapp"), "the Tk app")
    wait_for(lambda: log.exists() and log.stat().st_size, "the Tk app's geometry")
    # tkapp places its widgets at fixed offsets in its client area.
    targets = Targets(xterm=(xterm["x"] + 100, xterm["y"] + 100), entry=(app["x"] + 40, app["y"] + 70),
                      buttons={"one": (app["x"] + 25, app["y"] + 22), "two": (app["x"] + 125, app["y"] + 22)})
    return [tk], log, targets


def tk_records(log: Path, event: str) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in records if r["event"] == event]


def print_minute(index: int, minute: Minute, first: ProcessStats) -> None:
    stats = minute.stats
    assert stats is not None
    ms = [percentile(minute.latencies, q) * 1000 for q in (0.5, 0.9, 0.99)]
    print(f"{index:6d} {minute.turns:6d} {len(minute.latencies):6d} {len(minute.errors):6d} "
          f"{ms[0]:8.1f} {ms[1]:8.1f} {ms[2]:8.1f} {stats.rss_mb:8.1f} {stats.rss_mb - first.rss_mb:+7.1f} "
          f"{stats.fds:5d} {stats.threads:7d} {len(stats.children):8d}")


def soak(agent: Agent, server: ServerProcess, minutes: float) -> tuple[ProcessStats, list[Minute]]:
    """Warm up, then turns until the time is up; the server after the warm-up and every minute's record."""
    for n in range(WARM_UP_TURNS):
        agent.turn(n)
    # One agent never overlaps its screenshots: a burst starts every capture worker now, not mid-soak.
    burst = Soak(server, SCREEN, WARM_UP_BURST, time.monotonic() + 60)
    asyncio.run(burst.run(WARM_UP_BURST * 10, seed=0))
    if agent.minute.errors or burst.errors:
        raise SystemExit(f"warm-up failed: {(agent.minute.errors + burst.errors)[:3]}")
    pid = server.proc.pid
    first = settled_stats(pid)
    print(f"after the warm-up ({WARM_UP_TURNS} turns, {WARM_UP_BURST * 10} concurrent screenshots): {first.row()}\n"
          f"  children: {child_names(first.children)}\n")
    print(f"{'minute':>6} {'turns':>6} {'calls':>6} {'errors':>6} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} "
          f"{'RSS MB':>8} {'dRSS':>7} {'fds':>5} {'threads':>7} {'children':>8}")
    done: list[Minute] = []
    agent.minute = Minute()
    end = time.monotonic() + minutes * 60
    next_sample = time.monotonic() + 60
    for n in range(WARM_UP_TURNS, WARM_UP_TURNS + MAX_TURNS):
        now = time.monotonic()
        if now >= next_sample or now >= end:
            agent.minute.stats = process_stats(pid)
            done.append(agent.minute)
            print_minute(len(done), agent.minute, first)
            agent.minute, next_sample = Minute(), next_sample + 60
            if now >= end:
                break
        agent.turn(n)
    return first, done


def app_failures(agent: Agent, log: Path) -> list[str]:
    """What the Tk app's own log says it missed of the clicks and texts sent to it."""
    sent = agent.clicks
    with contextlib.suppress(AssertionError):  # compared below
        wait_for(lambda: len(tk_records(log, "click")) >= len(sent), "the Tk app's clicks", timeout=10)
    received = [r["button"] for r in tk_records(log, "click")]
    entry = [r["text"] for r in tk_records(log, "entry")]
    print(f"Tk app: {len(sent)} button clicks sent, {len(received)} in its log; entry typed and cleared "
          f"{entry.count(TEXT)} of {agent.entries} times, last text {entry[-1] if entry else None!r}")
    failures = []
    if received != sent:
        failures.append("the Tk app did not log the clicks sent, in order")
    if not entry or entry[-1] != "" or entry.count(TEXT) != agent.entries:
        failures.append("the Tk app's entry did not get every text and clear")
    return failures


def verdict(args: argparse.Namespace, first: ProcessStats, minutes: list[Minute]) -> list[str]:
    """Print the totals and the drift; the thresholds missed."""
    errors = [e for m in minutes for e in m.errors]
    settled, last = minutes[0].stats, minutes[-1].stats
    assert settled is not None and last is not None
    everything: dict[str, list[float]] = defaultdict(list)
    for m in minutes:
        for kind, values in m.by_kind.items():
            everything[kind].extend(values)
    print()
    for kind, values in sorted(everything.items()):
        summary(kind, values)
    timed = [m for m in minutes if m.latencies]
    drift = percentile(timed[-1].latencies, 0.5) / percentile(timed[0].latencies, 0.5)
    growth = last.rss_mb - settled.rss_mb
    print(f"\n{sum(m.turns for m in minutes)} turns, {sum(len(m.latencies) for m in minutes)} requests, "
          f"{len(errors)} errors in {len(minutes)} minutes")
    print(f"RSS {first.rss_mb:.1f} MB after the warm-up, {settled.rss_mb:.1f} after minute 1, {last.rss_mb:.1f} "
          f"at the end: {growth:+.1f} MB after minute 1 (target < {args.max_rss_growth_mb:.0f})")
    print(f"p50 minute 1 -> last x{drift:.2f} (target <= {args.max_latency_drift:.1f}); warm-up -> end: fds "
          f"{first.fds} -> {last.fds}, threads {first.threads} -> {last.threads}, children "
          f"{len(first.children)} -> {len(last.children)}")
    failures = []
    if errors:
        failures.append(f"{len(errors)} errors, first: {errors[0]}")
    if growth >= args.max_rss_growth_mb:
        failures.append(f"RSS grew {growth:.1f} MB after minute 1")
    if not last.same_handles(first):
        failures.append(f"handles grew: {first.row()} -> {last.row()}; children {child_names(last.children)}")
    if drift > args.max_latency_drift:
        failures.append(f"p50 latency drifted x{drift:.2f}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--quiet-ms", type=int, default=100, help="settle quietMs of every request")
    parser.add_argument("--max-rss-growth-mb", type=float, default=20, help="after minute 1")
    parser.add_argument("--max-latency-drift", type=float, default=3.0, help="last minute's p50 / the first's")
    parser.add_argument("--display-num", type=int, default=402)
    args = parser.parse_args()
    with bench_desktop("agent-soak", args.display_num, terminals=4, images=1) as bench:
        procs, log, targets = open_apps(bench)
        try:
            agent = Agent(bench.api, targets, args.quiet_ms)
            first, minutes = soak(agent, bench.server, args.minutes)
            failures = verdict(args, first, minutes) + app_failures(agent, log)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
    for failure in failures:
        print(f"MISSED: {failure}")
    print("all targets met" if not failures else "")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # the table, minute by minute
    sys.exit(main())
