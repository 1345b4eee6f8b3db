"""desktop/processes/: the registry and the reaper with real child processes."""
