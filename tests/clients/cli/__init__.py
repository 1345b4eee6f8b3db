"""The `sandbox-desktop` command line, run as real subprocesses."""
