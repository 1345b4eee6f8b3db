"""Key-name parsing: xdotool chords, the spellings agents send, and text to keysyms (no X needed)."""

from __future__ import annotations

import pytest

from desktop.core.errors import DesktopError, PayloadTooLarge
from desktop.input.keys import (
    MAX_TEXT_CHARS,
    char_keysym,
    keysym_for_name,
    parse_chord,
    parse_keys,
    text_keysyms,
    with_modifiers,
)

RETURN, TAB, ESCAPE, BACKSPACE, DELETE = 0xFF0D, 0xFF09, 0xFF1B, 0xFF08, 0xFFFF
CTRL, SHIFT, ALT, SUPER = 0xFFE3, 0xFFE1, 0xFFE9, 0xFFEB


@pytest.mark.parametrize(("names", "keysym"), [
    (["CTRL", "ctrl", "Control", "control", "ControlLeft", "Control_L"], CTRL),
    (["shift", "SHIFT", "ShiftLeft", "Shift_L"], SHIFT),
    (["alt", "Alt", "option", "Option", "Alt_L"], ALT),
    (["cmd", "command", "meta", "Meta", "win", "super", "Super", "Super_L", "OS"], SUPER),
    (["ENTER", "Enter", "Return", "return", "RETURN"], RETURN),
    (["ESC", "Esc", "Escape", "escape"], ESCAPE),
    (["Page_Down", "PageDown", "pgdn", "PGDN", "Next"], 0xFF56),
    (["Page_Up", "PageUp", "pgup", "Prior"], 0xFF55),
    (["ArrowLeft", "Left", "left"], 0xFF51),
    (["ArrowUp", "Up"], 0xFF52),
    (["Backspace", "BackSpace", "backspace"], BACKSPACE),
    (["Delete", "Del", "DEL"], DELETE),
    (["Space", "space", "SPACE"], 0x20),
    (["Tab", "TAB"], TAB),
    (["Home"], 0xFF50),
    (["End"], 0xFF57),
    (["Insert", "Ins"], 0xFF63),
    (["PrintScreen", "Print", "print"], 0xFF61),
    (["Menu", "ContextMenu"], 0xFF67),
    (["CapsLock", "Caps_Lock"], 0xFFE5),
    (["AltGraph", "AltGr"], 0xFE03),
    (["KP_0", "kp_0", "Numpad0"], 0xFFB0),
    (["KP_Enter", "NumpadEnter"], 0xFF8D),
    (["F1", "f1"], 0xFFBE),
    (["F24", "f24"], 0xFFBE + 23),
    (["XF86AudioPlay", "MediaPlayPause"], 0x1008FF14),
    (["EuroSign"], 0x20AC),
    (["U+20AC", "U20AC", "€"], 0x010020AC),
    (["0xff0d"], RETURN),
])
def test_aliases_and_spellings(names: list[str], keysym: int) -> None:
    for name in names:
        assert keysym_for_name(name) == keysym, name


def test_single_characters() -> None:
    assert parse_chord("a") == [ord("a")]
    assert parse_chord("A") == [ord("A")]
    assert parse_chord("é") == [0xE9]
    assert parse_chord("+") == [ord("+")]
    assert parse_chord("日") == [0x01000000 + ord("日")]
    assert parse_chord("🙂") == [0x01000000 + 0x1F642]
    assert keysym_for_name("U+00E9") == 0xE9  # Latin-1 stays Latin-1


def test_xdotool_chords() -> None:
    assert parse_chord("ctrl+shift+t") == [CTRL, SHIFT, ord("t")]
    assert parse_chord("ctrl+l") == [CTRL, ord("l")]
    assert parse_chord("super") == [SUPER]
    assert parse_chord("ctrl++") == [CTRL, ord("+")]
    assert parse_chord("ctrl+plus") == [CTRL, ord("+")]
    assert parse_chord(" ctrl+c ") == [CTRL, ord("c")]
    assert parse_chord("ctrl+ctrl+c") == [CTRL, ord("c")]  # duplicates dropped


def test_sequences_of_chords() -> None:
    assert parse_keys("ctrl+a BackSpace") == [[CTRL, ord("a")], [BACKSPACE]]
    assert parse_keys("ctrl + c") == [[CTRL, ord("c")]]
    assert parse_keys("Return") == [[RETURN]]


def test_modifiers_are_prepended_in_reference_order() -> None:
    chords = with_modifiers([[ord("t")]], ctrl=True, shift=True, alt=True, cmd=True)
    assert chords == [[CTRL, SHIFT, ALT, SUPER, ord("t")]]
    assert with_modifiers([[CTRL, ord("c")]], ctrl=True) == [[CTRL, ord("c")]]
    assert with_modifiers([[ord("x")]], shift=True) == [[SHIFT, ord("x")]]


def problem(call: object, *args: object) -> DesktopError:
    with pytest.raises(DesktopError) as info:
        call(*args)  # type: ignore[operator]
    assert info.value.code == "desktop_invalid_action"
    return info.value


def test_unknown_key_names_it_and_the_field() -> None:
    err = problem(parse_chord, "ctrl+Foo")
    assert str(err).startswith("unknown key 'Foo' in 'ctrl+Foo'")
    assert err.extensions["errors"][0]["field"] == "key"
    assert "unknown key 'Bogus'" in str(problem(parse_keys, "ctrl+a Bogus"))
    assert "unknown key 'Unidentified'" in str(problem(parse_chord, "Unidentified"))


@pytest.mark.parametrize("blank", ["", " ", "\t\n"])
def test_blank_key(blank: str) -> None:
    assert str(problem(parse_chord, blank)) == "key must not be empty"
    assert str(problem(parse_keys, blank)) == "key must not be empty"


def test_empty_part_of_a_chord() -> None:
    assert "empty key name" in str(problem(parse_chord, "ctrl+"))
    assert "empty key name" in str(problem(parse_chord, "ctrl++a"))


def test_text_keysyms() -> None:
    assert text_keysyms("aé\n\tZ") == [ord("a"), 0xE9, RETURN, TAB, ord("Z")]
    assert text_keysyms("a\r\nb\rc") == [ord("a"), RETURN, ord("b"), RETURN, ord("c")]
    assert text_keysyms("✓🙂") == [0x01000000 + 0x2713, 0x01000000 + 0x1F642]
    assert char_keysym("\x1b") == ESCAPE


def test_text_errors() -> None:
    err = problem(text_keysyms, "")
    assert str(err) == "text must not be empty"
    assert err.extensions["errors"][0]["field"] == "text"
    assert "text[2]" in str(problem(text_keysyms, "ab\x07"))
    assert "surrogate" in str(problem(text_keysyms, "a\ud83d"))
    with pytest.raises(PayloadTooLarge) as info:
        text_keysyms("x" * (MAX_TEXT_CHARS + 1))
    assert info.value.code == "payload_too_large"
    assert len(text_keysyms("x" * MAX_TEXT_CHARS)) == MAX_TEXT_CHARS
