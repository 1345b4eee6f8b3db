"""`/v1/desktop/clipboard`: translates HTTP to calls of `desktop.clipboard.owner.Clipboard`."""

from __future__ import annotations

import asyncio
import base64
import binascii

from starlette.requests import Request
from starlette.responses import Response

from api.http.operations import Operation
from api.server.services import desktop_of
from desktop.clipboard.owner import parse_selection
from desktop.core.errors import DesktopError, FieldError, invalid_action
from desktop.x11.selection import PNG, PNG_SIGNATURE
from sandbox_desktop_wire.base import OkResponse
from sandbox_desktop_wire.clipboard import ClipboardFormat, ClipboardQuery, ClipboardResponse, ClipboardWriteRequest
from sandbox_desktop_wire.problems import ProblemCode

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
ERRORS = (400, 409, 500, 503)
TAGS = ("clipboard",)
# Serialising a long text (≈ 15 ms per MB of non-ASCII) would stall the event loop: do it in a thread.
INLINE_JSON_CHARS = 64 * 1024
# Decoding base64 costs about 1 ms per MB: beyond this, in a thread too.
INLINE_BASE64_CHARS = 1024 * 1024


class ClipboardNoImage(DesktopError):
    code = ProblemCode.CLIPBOARD_NO_IMAGE


def read_format(request: Request, query: ClipboardQuery) -> ClipboardFormat:
    """`format` when given (a 400 naming it otherwise), else `image` when the client accepts only PNG."""
    if query.format is not None:
        try:
            return ClipboardFormat(query.format)
        except ValueError:
            raise invalid_action(f"format must be `text` or `image`, not `{query.format}`", "format",
                                 "query") from None
    accept = request.headers.get("accept", "")
    wants_png = PNG in accept and "application/json" not in accept
    return ClipboardFormat.IMAGE if wants_png else ClipboardFormat.TEXT


async def get_clipboard(request: Request, query: ClipboardQuery) -> ClipboardResponse | Response:
    selection = parse_selection(query.selection, location="query", allow_both=False)  # a 400 whatever the state
    fmt = read_format(request, query)
    desktop = desktop_of(request)
    match fmt:
        case ClipboardFormat.IMAGE:
            image = await desktop.clipboard.get_image(desktop.session(), selection)
            if image is None:
                raise ClipboardNoImage(f"the {selection} selection offers no {PNG}: nothing was copied, only text "
                                       "was, or the application that copied refused to give it as PNG")
            return Response(image, media_type=PNG)
        case ClipboardFormat.TEXT:
            text = await desktop.clipboard.get(desktop.session(), selection)
            model = ClipboardResponse(text=text, selection=selection)
            if len(text) <= INLINE_JSON_CHARS:
                return model
            return Response(await asyncio.to_thread(model.to_json), media_type="application/json")


def decode_png(encoded: str) -> bytes:
    """The PNG bytes of `image` (base64); a 400 naming `image` when it is not base64 or not a PNG."""
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise invalid_action("image must be base64 (the standard alphabet, with padding)", "image") from None
    if not data.startswith(PNG_SIGNATURE):
        raise invalid_action("image must be a PNG (its bytes do not start with the PNG signature)", "image")
    return data


async def set_clipboard(request: Request, body: ClipboardWriteRequest) -> OkResponse:
    selection = parse_selection(body.selection, location="body", allow_both=True)
    if body.text is None and body.image is None:
        raise FieldError([{"location": "body", "field": "text", "message": "field required (or give `image`)",
                           "type": "missing"}], wrong_shape=True)
    image = None
    if body.image is not None:
        encoded = body.image
        image = decode_png(encoded) if len(encoded) <= INLINE_BASE64_CHARS else \
            await asyncio.to_thread(decode_png, encoded)
    desktop = desktop_of(request)
    await desktop.clipboard.set(desktop.session(), body.text, selection, image=image)
    return OkResponse()


OPERATIONS = [
    Operation("GET", "/v1/desktop/clipboard", get_clipboard,
              "Read the clipboard (or the primary selection) as text, or with `format=image` its PNG (`image/png`)",
              query=ClipboardQuery, response=ClipboardResponse, invalid_code=INVALID, errors=(*ERRORS, 404, 504),
              tags=TAGS),
    Operation("POST", "/v1/desktop/clipboard", set_clipboard,
              "Put text and/or a PNG image on the clipboard, the primary selection or both; answers once the "
              "desktop owns it",
              body=ClipboardWriteRequest, response=OkResponse, invalid_code=INVALID, errors=(*ERRORS, 413),
              body_required=True, tags=TAGS),
]
