"""Unit tests of desktop/, one folder per room."""
