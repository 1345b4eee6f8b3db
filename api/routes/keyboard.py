"""`/v1/desktop/keyboard/*`: translates HTTP to calls of `desktop.input.keyboard.Keyboard`."""

from __future__ import annotations

from starlette.requests import Request

from api.convert.effects import observed
from api.http.operations import Operation
from api.server.services import desktop_of
from desktop.input.keyboard import DEFAULT_DELAY_MS, check_delay
from desktop.input.keys import parse_chord, parse_keys, text_keysyms, with_modifiers
from sandbox_desktop_wire.keyboard import (
    KeyboardKeyRequest,
    KeyboardPressRequest,
    KeyboardResponse,
    KeyboardTypeRequest,
)
from sandbox_desktop_wire.problems import ProblemCode

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
ERRORS = (409, 502, 503)
TAGS = ("keyboard",)


async def type_text(request: Request, body: KeyboardTypeRequest) -> KeyboardResponse:
    delay_ms = DEFAULT_DELAY_MS if body.delay_ms is None else body.delay_ms
    check_delay(delay_ms)
    keysyms = text_keysyms(body.text)  # bad input is a 400/413 whatever the desktop's state
    desktop = desktop_of(request)
    _, effect = await observed(desktop, body.report_effect,
                               lambda: desktop.keyboard.type_keysyms(desktop.session(), keysyms, delay_ms))
    return KeyboardResponse(effect=effect)


async def press(request: Request, body: KeyboardPressRequest) -> KeyboardResponse:
    mods = body.modifiers
    chords = parse_keys(body.key)
    if mods is not None:
        chords = with_modifiers(chords, ctrl=bool(mods.ctrl), shift=bool(mods.shift), alt=bool(mods.alt),
                                cmd=bool(mods.cmd))
    desktop = desktop_of(request)
    _, effect = await observed(desktop, body.report_effect,
                               lambda: desktop.keyboard.press_chords(desktop.session(), chords))
    return KeyboardResponse(effect=effect)


async def down(request: Request, body: KeyboardKeyRequest) -> KeyboardResponse:
    return await _chord(request, body, down=True)


async def up(request: Request, body: KeyboardKeyRequest) -> KeyboardResponse:
    return await _chord(request, body, down=False)


async def _chord(request: Request, body: KeyboardKeyRequest, down: bool) -> KeyboardResponse:
    keysyms = parse_chord(body.key)
    desktop = desktop_of(request)
    keys = desktop.keyboard.chord_down if down else desktop.keyboard.chord_up
    _, effect = await observed(desktop, body.report_effect, lambda: keys(desktop.session(), keysyms))
    return KeyboardResponse(effect=effect)


OPERATIONS = [
    Operation("POST", "/v1/desktop/keyboard/type", type_text, "Type Unicode text (any layout, emoji included)",
              body=KeyboardTypeRequest, response=KeyboardResponse, invalid_code=INVALID, errors=(400, 413, *ERRORS),
              body_required=True, tags=TAGS),
    Operation("POST", "/v1/desktop/keyboard/press", press, "Press and release a key or chord (xdotool syntax)",
              body=KeyboardPressRequest, response=KeyboardResponse, invalid_code=INVALID, errors=(400, *ERRORS),
              body_required=True, tags=TAGS),
    Operation("POST", "/v1/desktop/keyboard/down", down, "Hold a key or chord down until /up",
              body=KeyboardKeyRequest, response=KeyboardResponse, invalid_code=INVALID, errors=(400, *ERRORS),
              body_required=True, tags=TAGS),
    Operation("POST", "/v1/desktop/keyboard/up", up, "Release a key or chord held with /down",
              body=KeyboardKeyRequest, response=KeyboardResponse, invalid_code=INVALID, errors=(400, *ERRORS),
              body_required=True, tags=TAGS),
]
