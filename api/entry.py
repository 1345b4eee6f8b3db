"""The `sandbox-desktop` console script: `ready` takes a fast path, everything else goes to `api.cli`."""

from __future__ import annotations

import sys


def main() -> int:
    if sys.argv[1:2] == ["ready"]:
        from api import probe  # a probe runs every few seconds: skip the full CLI's imports

        return probe.main(sys.argv[2:])
    from api import cli

    return cli.main()
