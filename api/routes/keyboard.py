"""`/v1/desktop/keyboard/*`: translates HTTP to calls of `desktop.input.keyboard.Keyboard`."""

from __future__ import annotations

from starlette.requests import Request

from api.http.operations import Operation
from api.server.services import desktop_of
from desktop.input.keyboard import DEFAULT_DELAY_MS, check_delay
from desktop.input.keys import parse_chord, parse_keys, text_keysyms, with_modifiers
from sandbox_desktop_wire.base import OkResponse
from sandbox_desktop_wire.keyboard import KeyboardKeyRequest, KeyboardPressRequest, KeyboardTypeRequest
from sandbox_desktop_wire.problems import ProblemCode

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
ERRORS = (409, 502, 503)
TAGS = ("keyboard",)



async def type_text(request: Request, body: KeyboardTypeRequest) -> OkResponse:
    delay_ms = DEFAULT_DELAY_MS if body.delay_ms is None else body.delay_ms
    check_delay(delay_ms)
    keysyms = text_keysyms(body.text)  # bad input is a 400/413 whatever the desktop's state
    desktop = desktop_of(request)
    await desktop.keyboard.type_keysyms(desktop.session(), keysyms, delay_ms)
    return OkResponse()


async def press(request: Request, body: KeyboardPressRequest) -> OkResponse:
    mods = body.modifiers
    chords = parse_keys(body.key)
    if mods is not None:
        chords = with_modifiers(chords, ctrl=bool(mods.ctrl), shift=bool(mods.shift), alt=bool(mods.alt),
                                cmd=bool(mods.cmd))
    desktop = desktop_of(request)
    await desktop.keyboard.press_chords(desktop.session(), chords)
    return OkResponse()


async def down(request: Request, body: KeyboardKeyRequest) -> OkResponse:
    keysyms = parse_chord(body.key)
    desktop = desktop_of(request)
    await desktop.keyboard.chord_down(desktop.session(), keysyms)
    return OkResponse()


async def up(request: Request, body: KeyboardKeyRequest) -> OkResponse:
    keysyms = parse_chord(body.key)
    desktop = desktop_of(request)
    await desktop.keyboard.chord_up(desktop.session(), keysyms)
    return OkResponse()


OPERATIONS = [
    Operation("POST", "/v1/desktop/keyboard/type", type_text, "Type Unicode text (any layout, emoji included)",
              body=KeyboardTypeRequest, response=OkResponse, invalid_code=INVALID, errors=(400, 413, *ERRORS),
              body_required=True, tags=TAGS),
    Operation("POST", "/v1/desktop/keyboard/press", press, "Press and release a key or chord (xdotool syntax)",
              body=KeyboardPressRequest, response=OkResponse, invalid_code=INVALID, errors=(400, *ERRORS),
              body_required=True, tags=TAGS),
    Operation("POST", "/v1/desktop/keyboard/down", down, "Hold a key or chord down until /up",
              body=KeyboardKeyRequest, response=OkResponse, invalid_code=INVALID, errors=(400, *ERRORS),
              body_required=True, tags=TAGS),
    Operation("POST", "/v1/desktop/keyboard/up", up, "Release a key or chord held with /down",
              body=KeyboardKeyRequest, response=OkResponse, invalid_code=INVALID, errors=(400, *ERRORS),
              body_required=True, tags=TAGS),
]
