"""The pytest plugin (pytest_sandbox_desktop), used as a user uses it."""
