"""Two tasks through OSWorld's real harness (`desktop_env` 1.0.2) with the `sandbox-desktop` provider, run by
tests/api/osworld/test_provider.py under an interpreter that has desktop-env: `python osworld_task.py URL TOKEN
CACHE_DIR`; the last line printed is `scores <first> <second>`.

The first task's setup writes /home/user/task.txt, its one action moves the pointer with pyautogui, and its checker
reads both back through the guest (1.0); the second task's desktop is the first one reverted (made anew), so the
same checker finds no file (0.0)."""

from __future__ import annotations

import sys

from desktop_env.desktop_env import DesktopEnv

from sandbox_desktop_client import osworld

CHECK = {
    "func": "check_include_exclude",
    "result": {"type": "vm_command_line", "shell": True,
               "command": "cat /home/user/task.txt; python -c 'import pyautogui; print(tuple(pyautogui.position()))'"},
    "expected": {"type": "rule", "rules": {"include": ["ready", "(123, 45)"], "exclude": []}},
}
FIRST = {"id": "sandbox-desktop-first", "instruction": "Move the pointer to (123, 45).", "evaluator": CHECK,
         "config": [{"type": "execute", "parameters": {
             "command": ["python", "-c", "open('/home/user/task.txt', 'w').write('ready')"]}}]}
SECOND = {"id": "sandbox-desktop-second", "instruction": "Nothing.", "config": [], "evaluator": CHECK}


def main() -> None:
    url, token, cache = sys.argv[1:4]
    osworld.install(url, token=token or None)
    env = DesktopEnv(provider_name=osworld.PROVIDER_NAME, action_space="pyautogui", screen_size=(640, 400),
                     require_a11y_tree=False, cache_dir=cache)
    try:
        env.reset(task_config=FIRST)
        env.step("pyautogui.moveTo(123, 45)", pause=0.5)
        first = env.evaluate()
        env.reset(task_config=SECOND)
        env.step("pyautogui.moveTo(123, 45)", pause=0.5)
        second = env.evaluate()
    finally:
        env.close()
    print(f"scores {float(first)} {float(second)}")


if __name__ == "__main__":
    main()
