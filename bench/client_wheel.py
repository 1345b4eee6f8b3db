"""Benchmark installing the client distribution: its wheel into an empty venv, timed, and what it brings.

Baseline in the same run: installing httpx and pydantic alone (the two dependencies) into another empty
venv, so the figure shows what the client itself adds. Target (issue: the light client): <= 10 s.
Usage: .venv/bin/python bench/client_wheel.py [--no-cache]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.clients.python.test_client_wheel import build_wheel, fresh_venv


def timed_install(python: Path, *what: str, cache: bool) -> float:
    started = time.perf_counter()
    subprocess.run([str(python), "-m", "pip", "install", "-q", *([] if cache else ["--no-cache-dir"]), *what],
                   check=True, timeout=600)
    return time.perf_counter() - started


def packages(python: Path) -> list[str]:
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format", "freeze"], capture_output=True, text=True,
                            check=True, timeout=60, cwd=python.parent).stdout.split()
    return sorted(p.split("==")[0] for p in listed if not p.startswith(("pip==", "setuptools==", "wheel==")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-cache", action="store_true", help="download every package (pip --no-cache-dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-client-") as tmp:
        root = Path(tmp)
        wheel = build_wheel(root / "dist")
        base = timed_install(fresh_venv(root / "base"), "httpx", "pydantic", cache=not args.no_cache)
        python = fresh_venv(root / "client")
        client = timed_install(python, str(wheel), cache=not args.no_cache)
        found = packages(python)
        print(f"{'httpx + pydantic alone into an empty venv':<48} {base:6.2f} s")
        print(f"{'the client wheel into an empty venv':<48} {client:6.2f} s   ({client / base:.2f}x the two alone)")
        print(f"{'packages it brings':<48} {len(found):6d}     {', '.join(found)}")


if __name__ == "__main__":
    main()
