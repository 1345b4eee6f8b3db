"""Servers reserving display numbers at the same moment never get the same one: a display's lock file names its
owner from the moment it exists (desktop/sandbox/displays.py). Real processes, real lock files in /tmp."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from desktop.sandbox import displays

REPO = Path(__file__).resolve().parents[4]
FIRST = 900
"""A range of display numbers no test starts an X server on (tests/support/xvfb.py picks low ones)."""
SERVERS, EACH, ROUNDS = 6, 8, 4

RESERVE = """
import sys
from desktop.sandbox import displays
first, count = int(sys.argv[1]), int(sys.argv[2])
sys.stdin.readline()  # all start together
print(" ".join(str(displays.reserve(first, False).number) for _ in range(count)), flush=True)
sys.stdin.readline()  # and hold their locks until every one has reserved
"""


def test_servers_reserving_at_once_never_share_a_display() -> None:
    try:
        for _ in range(ROUNDS):
            servers = [subprocess.Popen([sys.executable, "-c", RESERVE, str(FIRST), str(EACH)], cwd=REPO, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(SERVERS)]
            try:
                for server in servers:
                    assert server.stdin is not None
                    server.stdin.write("go\n")
                    server.stdin.flush()
                lines = [server.stdout.readline() if server.stdout else "" for server in servers]
                taken = [int(number) for line in lines for number in line.split()]
            finally:
                for server in servers:
                    server.communicate("done\n", timeout=30)  # its locks stay behind it, a dead owner's
            assert len(taken) == SERVERS * EACH, taken
            assert len(set(taken)) == len(taken), f"a display was given to two servers: {sorted(taken)}"
    finally:
        for number in range(FIRST, FIRST + displays.ATTEMPTS):
            displays.Display(number).lock.unlink(missing_ok=True)
