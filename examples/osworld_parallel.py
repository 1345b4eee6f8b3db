"""Evaluate OSWorld tasks in parallel on one sandbox-desktop server, with OSWorld's own harness (`desktop_env`,
unchanged) and the `sandbox-desktop` provider (docs/osworld.md "Running OSWorld against a server").

    pip install 'sandbox-desktop-client[osworld]'
    sandbox-desktop install osworld --yes          # on the server's machine: the apps and the desktops' Python
    python examples/osworld_parallel.py --server http://127.0.0.1:2468 \
        --examples OSWorld/evaluation_examples/examples --meta OSWorld/evaluation_examples/test_small.json \
        --workers 4 --out results.json

Each worker holds one `DesktopEnv` (one desktop on the server, its guest API on a port of its own) and takes the
next task from a shared queue: `reset` runs the task's setup in the desktop, the agent acts, `evaluate` scores.
The agent here is `no_op_agent`, which answers DONE at once (a baseline: what a task scores with nothing done);
pass your own with `--agent module:function`, a function `(instruction, observation) -> list of pyautogui code
strings or "DONE"/"FAIL"/"WAIT"`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox_desktop_client import osworld

Agent = Callable[[str, dict[str, Any]], list[str]]


def no_op_agent(instruction: str, observation: dict[str, Any]) -> list[str]:
    return ["DONE"]


def load_tasks(examples: Path, meta: Path | None, domain: str | None, limit: int | None) -> list[dict[str, Any]]:
    """Task configs: those `meta` lists (`{domain: [id, ...]}`, OSWorld's test_*.json), else every file."""
    if meta is not None:
        listed = json.loads(meta.read_text())
        paths = [examples / d / f"{task_id}.json"
                 for d, ids in listed.items() if domain in (None, d) for task_id in ids]
    else:
        paths = sorted(examples.glob(f"{domain or '*'}/*.json"))
    tasks = [json.loads(path.read_text()) | {"domain": path.parent.name} for path in paths]
    return tasks[:limit] if limit is not None else tasks


def run_task(env: Any, task: dict[str, Any], agent: Agent, max_steps: int) -> float:
    observation = env.reset(task_config=task)
    for _ in range(max_steps):
        actions = agent(task["instruction"], observation)
        finished = False
        for action in actions:
            observation, _, done, _ = env.step(action, pause=1)
            finished = finished or done or action in ("DONE", "FAIL")
        if finished:
            break
    return float(env.evaluate())


def worker(tasks: queue.Queue[dict[str, Any]], results: dict[str, Any], lock: threading.Lock, agent: Agent,
           max_steps: int, width: int, height: int) -> None:
    from desktop_env.desktop_env import DesktopEnv  # after install(): it knows the provider

    env = DesktopEnv(provider_name=osworld.PROVIDER_NAME, action_space="pyautogui", screen_size=(width, height),
                     require_a11y_tree=False)
    try:
        while True:
            try:
                task = tasks.get_nowait()
            except queue.Empty:
                return
            started = time.monotonic()
            try:
                score: float | None = run_task(env, task, agent, max_steps)
                error = None
            except Exception as exc:  # one task's failure is its result; the worker goes on with the next
                score, error = None, f"{type(exc).__name__}: {exc}"
            with lock:
                results[task["id"]] = {"domain": task["domain"], "score": score, "error": error,
                                       "seconds": round(time.monotonic() - started, 1)}
                print(f"{task['domain']}/{task['id']}: {score if error is None else error}", flush=True)
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="http://127.0.0.1:2468")
    parser.add_argument("--token", default=None, help="the server's token (default: the client's lookup)")
    parser.add_argument("--examples", type=Path, required=True, help="OSWorld's evaluation_examples/examples")
    parser.add_argument("--meta", type=Path, help="a test_*.json listing the tasks to run")
    parser.add_argument("--domain", help="only this domain")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--workers", type=int, default=2, help="desktops at once (the server's --max-desktops caps)")
    parser.add_argument("--max-steps", type=int, default=15)
    parser.add_argument("--agent", help="module:function (default: DONE at once)")
    parser.add_argument("--revert", choices=list(osworld.Revert), default=osworld.Revert.RECREATE)
    parser.add_argument("--size", default="1920x1080", help="each desktop's screen, WxH")
    parser.add_argument("--out", type=Path, default=Path("osworld-results.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    agent: Agent = no_op_agent
    if args.agent:
        module, _, name = args.agent.partition(":")
        agent = getattr(importlib.import_module(module), name)
    osworld.install(args.server, token=args.token, revert=args.revert)
    width, height = (int(n) for n in args.size.split("x"))
    tasks: queue.Queue[dict[str, Any]] = queue.Queue()
    for task in load_tasks(args.examples, args.meta, args.domain, args.limit):
        tasks.put(task)
    results: dict[str, Any] = {}
    lock = threading.Lock()
    threads = [threading.Thread(target=worker, args=(tasks, results, lock, agent, args.max_steps, width, height))
               for _ in range(max(1, min(args.workers, tasks.qsize())))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    scored = [r["score"] for r in results.values() if r["score"] is not None]
    args.out.write_text(json.dumps(results, indent=2))
    print(f"{len(results)} tasks, {len(scored)} scored, mean {sum(scored) / max(1, len(scored)):.3f}; {args.out}")


if __name__ == "__main__":
    main()
