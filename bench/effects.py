"""Benchmark what asking for an action's effect (`reportEffect`, docs/effects.md) adds to the action.

Prints, in one run on the realistic scene (bench/scene.py), the median and p90 of
- a batch that settles (a key typed into a terminal and erased, `settle` quietMs 100) without and with
  `reportEffect`, paired round by round (which goes first alternating) so both see the same machine; the median
  of the pairs' differences is what the effect costs an action that settles already (target: at most 5 ms);
- the same batch asked for its effect after the observer let XDamage go (LINGER_S without a watch): the first
  call of a while pays for setting it up again (`--cold` rounds, each waiting LINGER_S first);
- a REST click on the empty desktop with `reportEffect`: an action with nothing to see waits out the whole
  settle window before it can say so (desktop/effects/observer.py SETTLE_S);
- the observer's own work for one action, in-process: subscribing, gathering a typing burst's events and making
  the wire's `effect` of them (what the end-to-end difference is made of, below its noise: a settle's frames come
  every 33 ms).
Usage: PYTHONPATH=client .venv/bin/python bench/effects.py [--rounds 60] [--cold 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from api.convert.effects import effect_model
from bench.common import bench_desktop, summary
from desktop.effects.observer import LINGER_S, WATCHED, EffectWatch
from desktop.events.bus import EventBus
from desktop.events.event_types import ScreenChanged

MAX_ROUNDS = 200
BUDGET_S = 120
"""Stop early past this, whatever `--rounds` asked: the machine is shared."""
BATCH = {"actions": [{"type": "type", "text": "x"}, {"type": "key", "keys": "BackSpace"}],
         "settle": {"quietMs": 100, "timeoutMs": 3000}}


def batch(api: httpx.Client, effect: bool) -> float:
    started = time.perf_counter()
    answer = api.post("/v1/desktop/actions", json={**BATCH, "reportEffect": effect}).json()
    elapsed = time.perf_counter() - started
    assert "error" not in answer and ("effect" in answer) == effect, answer
    return elapsed


async def observer_work(rounds: int, events: int = 20) -> list[float]:
    """Per round: subscribe, take `events` drawings of a typed word, and answer the wire's effect."""
    bus = EventBus()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        with bus.subscribe(WATCHED) as subscription:
            watch = EffectWatch(subscription)
            for i in range(events):
                bus.publish(ScreenChanged(10 + 7 * i, 30, 6, 13))
            effect_model(await watch.finish(settled=True)).to_json()
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--cold", type=int, default=3)
    args = parser.parse_args()
    rounds = max(1, min(args.rounds, MAX_ROUNDS))
    cold_rounds = max(0, min(args.cold, 10))
    with bench_desktop("effects", 196, width=1280, height=800, terminals=2, images=0) as bench:
        api = bench.api
        plain: list[float] = []
        observed: list[float] = []
        clicks: list[float] = []
        cold: list[float] = []
        deadline = time.monotonic() + BUDGET_S
        batch(api, False), batch(api, True)  # warm both paths up
        for _ in range(rounds):
            if time.monotonic() > deadline:
                break
            for effect in (False, True) if len(plain) % 2 == 0 else (True, False):  # neither always goes first
                (observed if effect else plain).append(batch(api, effect))
        for _ in range(min(rounds, 10)):
            if time.monotonic() > deadline:
                break
            started = time.perf_counter()
            answer = api.post("/v1/desktop/mouse/click", json={"x": 1270, "y": 790, "reportEffect": True}).json()
            clicks.append(time.perf_counter() - started)
            assert answer["effect"]["changed"] is False, answer
        for _ in range(cold_rounds):
            if time.monotonic() + LINGER_S > deadline:
                break
            time.sleep(LINGER_S + 0.5)
            cold.append(batch(api, True))
        base = summary("settling batch", plain)
        summary("settling batch, reportEffect", observed, base, "without")
        if cold:
            summary("settling batch, reportEffect, first in a while", cold, base, "without")
        added = statistics.median(o - p for o, p in zip(observed, plain, strict=True))
        print(f"{'added by reportEffect (median of paired differences)':<52} {added * 1000:8.2f} ms   "
              "(target <= 5 ms)")
        summary("click on the empty desktop, reportEffect", clicks)
    summary("observer's own work per action (in-process)", asyncio.run(observer_work(min(rounds * 10, 1000))))


if __name__ == "__main__":
    main()
