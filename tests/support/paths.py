"""Where the tests find the repository and its parts, wherever in tests/ a test file lives."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The repository's root: the working directory of every server and CLI process the tests start."""
SDK_DIR = REPO / "tests" / "sdk"
"""The reference TypeScript SDK's npm project (tests/sdk), installed by scripts/setup.sh."""
DOCS = REPO / "docs"
