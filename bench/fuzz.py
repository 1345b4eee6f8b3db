"""Fuzz every API operation with many generated cases (the checks of tests/api/http/test_fuzz.py) and print the counts.

The main phase runs on one server; the stateful operations run after it on a second server (stub
xdg-open), each case from each of its states and followed by a reset.
Usage: python bench/fuzz.py [--examples N]   (N per operation, mode and state; 25 gives ~3,750 cases)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.conftest import SHARED, launch_server
from tests.support.fuzzing import (
    FUZZ_DESKTOP,
    OPENED_LOG,
    FuzzReport,
    fetch_document,
    fuzz,
    fuzz_stateful,
    stateful_server,
)


def print_count(label: str, cases: int) -> None:
    print(f"{label:<48} {cases:6d} cases", flush=True)


def main_phase(root: Path, examples: int) -> tuple[FuzzReport, set[str], bool]:
    """The main phase's report, every operation of the document, and whether the server survived."""
    server = launch_server(root)
    try:
        with server.client() as api:
            state = api.post("/v1/desktop/start", json=FUZZ_DESKTOP).json()
            assert state.get("state") == "active", state
        documented = {f"{method.upper()} {path}" for path, item in fetch_document(server)["paths"].items()
                      for method in item}
        sandbox = root / "sandbox"
        sandbox.mkdir()
        report = fuzz(server, sandbox, examples, progress=print_count)
        return report, documented, server.proc.poll() is None
    finally:
        server.stop()


def stateful_phase(root: Path, examples: int) -> tuple[FuzzReport, int, bool]:
    """The stateful phase's report, how many targets the stub xdg-open got, and whether the server survived."""
    root.mkdir()
    with stateful_server(root) as server:
        report = fuzz_stateful(server, root, examples, progress=print_count)
        alive = server.proc.poll() is None
    log = root / OPENED_LOG
    return report, len(log.read_text().splitlines()) if log.exists() else 0, alive


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=25, help="examples per operation, mode and state")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        root = Path(tmp)
        # Shared with the servers' desktops, as the tests' folders are (tests/conftest.py): the stub xdg-open
        # and the files the cases name live here, and a sandboxed desktop sees its own /tmp, not the machine's.
        root.chmod(0o755)
        SHARED[:] = [root]
        report, documented, alive = main_phase(root, args.examples)
        stateful, opened, stateful_alive = stateful_phase(root / "stateful", args.examples)
    fuzzed = set(report.cases) | set(stateful.cases)
    print(f"operations: {len(documented)} documented, {len(fuzzed)} fuzzed "
          f"({len(report.cases)} main, {len(stateful.cases)} stateful); "
          f"not fuzzed: {sorted(documented - fuzzed) or 'none'}")
    print(f"main phase: {report.render()}")
    print(f"stateful phase: {stateful.render()}")
    print(f"stub xdg-open was given {opened} targets")
    for phase, ok in (("main", alive), ("stateful", stateful_alive)):
        if not ok:
            print(f"the {phase} phase's server died during the run")
    failed = report.failures or stateful.failures or documented - fuzzed
    return 1 if failed or not (alive and stateful_alive) else 0


if __name__ == "__main__":
    sys.exit(main())
