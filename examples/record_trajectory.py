"""A short agent loop that records its run as a trajectory dataset (docs/trajectories.md).

The loop is what a computer-use agent does: look (a screenshot), decide, act (a batch of actions that
waits for the screen to settle), until done. `decide` here is a scripted policy so the example runs
offline; put a model call there (the screenshot's PNG in, an action in the batch format out).
The desktop is a fresh one of its own, recorded from the first step; at the end the recording and its
action log are exported as a zip of steps.jsonl, the screens before and after each action, and
steps.parquet when the server has pyarrow.

    python examples/record_trajectory.py --url http://127.0.0.1:2468 --out run.zip
    (the token comes from --token, $SANDBOX_DESKTOP_TOKEN, or the local server's token file)
"""

from __future__ import annotations

import argparse
import json
import time
import zipfile
from pathlib import Path
from typing import Any

from sandbox_desktop_client import Client, DesktopClient, Screenshot

COMMANDS = ["echo hello from the agent", "ls /", "date"]


def decide(step: int, shot: Screenshot, window: dict[str, int]) -> list[dict[str, Any]] | None:
    """The policy: the next actions, or None when done. A model would read `shot.data` (PNG) here."""
    if step == 0:  # click into the terminal so that it has the keyboard
        return [{"type": "click", "x": window["x"] + window["width"] // 2, "y": window["y"] + window["height"] // 2}]
    if step <= len(COMMANDS):
        return [{"type": "type", "text": COMMANDS[step - 1]}, {"type": "key", "keys": "Return"}]
    return None


def window_box(desktop: DesktopClient, window_id: str | None, timeout: float = 10.0) -> dict[str, int]:
    """Where the launched window is. A window the window manager is still placing (unmapped and mapped again
    into its frame) is left out of the listing for a moment: ask again until it is back."""
    deadline = time.monotonic() + timeout
    while True:
        for window in desktop.windows():
            if window.id == window_id:
                return {"x": window.x, "y": window.y, "width": window.width, "height": window.height}
        if time.monotonic() > deadline:
            raise SystemExit(f"window {window_id} is not listed {timeout:.0f} s after its launch")
        time.sleep(0.05)


def run(client: Client, out: Path, max_steps: int = 10) -> Path:
    with client.desktops.create(width=1024, height=700, tags={"example": "record_trajectory"}) as desktop:
        launched = desktop.launch("xterm", ["-geometry", "80x20+100+100"], wait=True)
        box = window_box(desktop, launched.window_id)
        recording = desktop.start_recording(fps=10)
        for step in range(max_steps):
            shot = desktop.screenshot(scale=0.5)
            actions = decide(step, shot, box)
            if actions is None:
                break
            answer = desktop.actions(actions, settle={"quietMs": 200, "timeoutMs": 3000})
            if answer.error is not None:
                raise SystemExit(f"step {step} failed: {answer.error.problem}")
        desktop.stop_recording()
        return desktop.download_trajectory(recording.id, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:2468")
    parser.add_argument("--token", default=None)
    parser.add_argument("--out", type=Path, default=Path("trajectory.zip"))
    args = parser.parse_args()
    with Client(args.url, token=args.token) as client:
        path = run(client, args.out)
    with zipfile.ZipFile(path) as archive:
        rows = [json.loads(line) for line in archive.read("steps.jsonl").splitlines()]
    print(f"{path}: {len(rows)} steps")
    for row in rows:
        print(f"  {row['step']:2d} {row['timestampMs']:6d} ms  {json.dumps(row['action'])}")


if __name__ == "__main__":
    main()
