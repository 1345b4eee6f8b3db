"""Launching apps and opening files."""
