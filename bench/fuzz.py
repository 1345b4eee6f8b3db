"""Fuzz every API operation with many generated cases (the checks of tests/test_fuzz.py) and print the counts.

Usage: python bench/fuzz.py [--examples N]   (N per operation and mode; 25 gives ~2,500 cases)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.conftest import launch_server
from tests.test_fuzz import DESKTOP, EXCLUDED, fuzz


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=25, help="examples per operation and generation mode")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        root = Path(tmp)
        server = launch_server(root)
        try:
            with server.client() as api:
                state = api.post("/v1/desktop/start", json=DESKTOP).json()
                assert state.get("state") == "active", state
            sandbox = root / "sandbox"
            sandbox.mkdir()
            report = fuzz(server, sandbox, args.examples,
                          progress=lambda label, n: print(f"{label:<48} {n:6d} cases", flush=True))
            alive = server.proc.poll() is None
        finally:
            server.stop()
    print(f"excluded: {len(EXCLUDED)} operations")
    print(report.render())
    if not alive:
        print("the server died during the run")
    return 1 if report.failures or not alive else 0


if __name__ == "__main__":
    sys.exit(main())
