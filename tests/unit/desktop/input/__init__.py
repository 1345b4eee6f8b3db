"""desktop/input/: key names and coordinate frames."""
