"""Tests run against a real Xvfb, real processes and a real server."""
