"""The `sandbox-desktop` console script: `ready` takes a fast path, everything else goes to `api.cli.main`."""

from __future__ import annotations

import sys


def main() -> int:
    if sys.argv[1:2] == ["ready"]:
        from api.cli import probe  # a probe runs every few seconds: skip the full CLI's imports

        return probe.main(sys.argv[2:])
    from api.cli import main as cli

    return cli.main()
