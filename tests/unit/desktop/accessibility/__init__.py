"""desktop/accessibility/: the pure parts."""
