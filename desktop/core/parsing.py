"""Integers from text that clients and headers send: ASCII digits only."""

from __future__ import annotations


def ascii_int(text: str | None) -> int | None:
    """The value of a run of ASCII digits (surrounding blanks ignored), else None.

    `str.isdigit()` alone is not enough: "²" passes it and makes `int()` raise (a 500 where a 400
    belongs), and "١٠٢٥" passes as 1025 although no client meant that.
    """
    if text is None:
        return None
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None
