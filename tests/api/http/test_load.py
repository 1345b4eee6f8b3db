"""Load: 200 concurrent clients with mixed requests on one server; per-client input order; no leaked handles.

An independent X client (tests/support/xprobe.py) records where the pointer went: every pointer action of a
client lands on a point that encodes (client, seq), so the probe's log shows each client's order.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from PIL import Image

from bench.soak import check_image, process_stats, settled_stats, shot_request
from tests.conftest import ServerProcess, managed_probe

DESKTOP = {"displayNum": 400, "width": 1280, "height": 800}
SW, SH = 1280, 800
CLIENTS = 200
INPUTS = 8  # pointer actions per client: moves and clicks, alternately
X_STEP, Y_STEP, MARGIN = 4, 10, 20  # client i, action s -> (MARGIN + i * X_STEP, MARGIN + s * Y_STEP) in the probe
PROBE_GEOMETRY = f"{2 * MARGIN + CLIENTS * X_STEP}x{2 * MARGIN + INPUTS * Y_STEP}+60+60"
RUN_TIMEOUT_S = 45
KEYS = "abcdefghijklmnopqrstuvwxyz"
FORMATS = {"png": "PNG", "jpeg": "JPEG", "webp": "WEBP"}


def succeeded(step: Step, response: httpx.Response) -> str | None:
    return None if response.is_success else f"{response.status_code}: {response.text[:300]}"


@dataclass(frozen=True)
class Step:
    """One request of a client and what a good answer looks like."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    body: dict[str, Any] | None = None
    check: Callable[[Step, httpx.Response], str | None] = succeeded


@dataclass
class Load:
    """What a run saw: failed requests and the most requests in flight at once."""

    errors: list[str] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0


def json_check(expect: Callable[[Any], bool]) -> Callable[[Step, httpx.Response], str | None]:
    def check(step: Step, response: httpx.Response) -> str | None:
        if response.status_code != 200 or not response.headers["content-type"].startswith("application/json"):
            return f"{response.status_code}: {response.text[:300]}"
        return None if expect(response.json()) else f"unexpected body {response.text[:300]}"
    return check


def image_check(step: Step, response: httpx.Response) -> str | None:
    """A decodable image of the asked format and exactly the asked size."""
    params = step.params or {}
    if problem := check_image(response, params):
        return problem
    scale = params.get("scale", 1.0)
    size = (params["width"], params["height"]) if "width" in params else (round(SW * scale), round(SH * scale))
    image = Image.open(io.BytesIO(response.content))
    if (image.format, image.size) != (FORMATS[params.get("format", "png")], size):
        return f"{image.format} {image.size} for {params}"
    return None


def pointer_step(client: int, seq: int, origin: tuple[int, int]) -> Step:
    point = {"x": origin[0] + MARGIN + client * X_STEP, "y": origin[1] + MARGIN + seq * Y_STEP}
    # The answer is the pointer position right after this very action, whatever other clients do.
    at_point = json_check(lambda body: (body["x"], body["y"]) == (point["x"], point["y"]))
    return Step("POST", "/v1/desktop/mouse/" + ("move" if seq % 2 == 0 else "click"), body=point, check=at_point)


def decode(event: dict[str, Any], origin: tuple[int, int]) -> tuple[int, int] | None:
    """The (client, seq) a pointer event's position encodes, if it is one of ours."""
    dx, dy = event["rootX"] - origin[0] - MARGIN, event["rootY"] - origin[1] - MARGIN
    if dx % X_STEP or dy % Y_STEP or not (0 <= dx // X_STEP < CLIENTS and 0 <= dy // Y_STEP < INPUTS):
        return None
    return dx // X_STEP, dy // Y_STEP


def small_shot(rng: random.Random) -> Step:
    if rng.random() < 0.5:
        return Step("GET", "/v1/desktop/screenshot", params={"format": "jpeg", "quality": 60, "scale": 0.25},
                    check=image_check)
    w, h = rng.choice([(64, 48), (160, 120), (200, 100)])
    return Step("GET", "/v1/desktop/screenshot/region", check=image_check,
                params={"x": rng.randrange(SW - w), "y": rng.randrange(SH - h), "width": w, "height": h,
                        "format": rng.choice(["png", "jpeg"])})


def load_plan(client: int, origin: tuple[int, int], title: str) -> list[Step]:
    """The client's pointer actions in order, with screenshots, status, windows and a key in between."""
    rng = random.Random(client)
    pointer = [pointer_step(client, seq, origin) for seq in range(INPUTS)]
    others = [small_shot(rng), small_shot(rng),
              Step("GET", "/v1/desktop/status", check=json_check(lambda body: body["state"] == "active")),
              Step("GET", "/v1/desktop/windows",
                   check=json_check(lambda body: title in [w["title"] for w in body["windows"]])),
              Step("POST", "/v1/desktop/keyboard/press", body={"key": rng.choice(KEYS)},
                   check=json_check(lambda body: body == {"ok": True}))]
    if client % 20 == 0:
        others.append(Step("GET", "/v1/desktop/screenshot", check=image_check))  # a full PNG now and then
    order = ["pointer"] * len(pointer) + ["other"] * len(others)
    rng.shuffle(order)
    pointers, rest = iter(pointer), iter(others)
    return [next(pointers if kind == "pointer" else rest) for kind in order]


async def run_load(server: ServerProcess, plans: list[list[Step]]) -> Load:
    """One connection per plan; all connect first, then all run their steps, each waiting for its answers."""
    load = Load()
    headers = {"Authorization": f"Bearer {server.token}"}

    async def run(http: httpx.AsyncClient, index: int, steps: list[Step]) -> None:
        for step in steps:
            load.in_flight += 1
            load.peak = max(load.peak, load.in_flight)
            try:
                response = await http.request(step.method, step.path, params=step.params, json=step.body)
                problem = step.check(step, response)
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            finally:
                load.in_flight -= 1
            if problem:
                load.errors.append(f"client {index} {step.method} {step.path} {step.params or step.body}: {problem}")

    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(
            httpx.AsyncClient(base_url=server.url, headers=headers, timeout=30, limits=httpx.Limits(max_connections=1)))
            for _ in plans]
        await asyncio.gather(*(http.get("/v1/health") for http in clients))  # every connection open
        await asyncio.wait_for(asyncio.gather(*(run(http, i, steps) for i, (http, steps)
                                                in enumerate(zip(clients, plans, strict=True)))), RUN_TIMEOUT_S)
    return load


def test_200_concurrent_clients_without_errors_and_in_order(srv: ServerProcess, api: httpx.Client, display: str,
                                                            tmp_path: Path) -> None:
    with managed_probe(api, display, tmp_path / "events.jsonl", "load-probe", PROBE_GEOMETRY) as (probe, rect):
        assert api.post(f"/v1/desktop/windows/{rect['id']}/focus").status_code == 200  # keys go to the probe
        origin = (rect["x"], rect["y"])
        plans = [load_plan(client, origin, "load-probe") for client in range(CLIENTS)]
        load = asyncio.run(run_load(srv, plans))
        assert not load.errors, f"{len(load.errors)} bad answers, first ones:\n" + "\n".join(load.errors[:10])
        assert load.peak >= CLIENTS // 2, f"only {load.peak} requests were ever in flight at once"

        presses = CLIENTS * INPUTS // 2
        probe.wait_for(lambda e: e["type"] == "ButtonPress", presses)
        probe.wait_for(lambda e: e["type"] == "KeyPress", CLIENTS)
        events = probe.events()
        seqs: dict[int, list[int]] = defaultdict(list)
        for event in events:
            decoded = decode(event, origin) if event["type"] in ("MotionNotify", "ButtonPress") else None
            # A click's motion and press carry the same seq: keep one.
            if decoded is not None and seqs[decoded[0]][-1:] != [decoded[1]]:
                seqs[decoded[0]].append(decoded[1])
        wrong = {client: seqs[client] for client in range(CLIENTS) if seqs[client] != list(range(INPUTS))}
        assert not wrong, f"{len(wrong)} clients' pointer actions arrived out of order or incompletely: " \
                          f"{dict(list(wrong.items())[:5])}"
        assert sum(e["type"] == "ButtonPress" for e in events) == presses
        assert sum(e["type"] == "KeyPress" for e in events) == CLIENTS


def leak_plan(client: int, shots: int = 40) -> list[Step]:
    """Screenshots of every format, scale and region as agents take them, with some input in between."""
    rng = random.Random(1000 + client)
    steps = []
    for i in range(shots):
        path, params = shot_request(rng, SW, SH)
        steps.append(Step("GET", path, params=params, check=image_check))
        if i % 8 == 0:
            steps.append(Step("POST", "/v1/desktop/mouse/click", body={"x": rng.randrange(SW), "y": SH - 1}))
            steps.append(Step("POST", "/v1/desktop/keyboard/press", body={"key": "shift"}))
    return steps


def test_fds_threads_and_children_return_to_baseline(srv: ServerProcess) -> None:
    pid = srv.proc.pid
    warm = asyncio.run(run_load(srv, [leak_plan(c, 16) for c in range(8)]))  # grows the worker pools to size
    assert not warm.errors, warm.errors[:10]
    before = settled_stats(pid)
    load = asyncio.run(run_load(srv, [leak_plan(c) for c in range(8, 16)]))  # 320 screenshots, 8 clients
    assert not load.errors, f"{len(load.errors)} bad answers, first ones:\n" + "\n".join(load.errors[:10])
    after = settled_stats(pid, before, timeout=10)
    assert after.same_handles(before), f"before: {before.row()} {sorted(before.children)}\n" \
                                       f"after:  {after.row()} {sorted(after.children)}\n" \
                                       f"now:    {process_stats(pid).row()}"
