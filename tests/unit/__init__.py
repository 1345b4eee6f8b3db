"""Tests of one package's code in-process, mirrored to the packages (tests/unit/desktop/input tests
desktop/input/...)."""
