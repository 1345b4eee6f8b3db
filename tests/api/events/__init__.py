"""Events, waits and the action log."""
