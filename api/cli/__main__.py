"""`python -m api.cli ...`: the `sandbox-desktop` command without its console script."""

import sys

from api.cli.main import main

sys.exit(main())
