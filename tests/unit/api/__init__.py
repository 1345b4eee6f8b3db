"""Unit tests of api/, one folder per room."""
