"""Screenshots."""
