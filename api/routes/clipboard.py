"""`/v1/desktop/clipboard`: translates HTTP to calls of `desktop.clipboard.Clipboard`."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from api.context import desktop_of
from api.operations import Operation
from desktop.clipboard import selection_names
from sandbox_desktop_wire.base import OkResponse
from sandbox_desktop_wire.clipboard import ClipboardQuery, ClipboardResponse, ClipboardWriteRequest
from sandbox_desktop_wire.problems import ProblemCode

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
ERRORS = (400, 409, 500, 503)
TAGS = ("clipboard",)
# Serialising a long text (≈ 15 ms per MB of non-ASCII) would stall the event loop: do it in a thread.
INLINE_JSON_CHARS = 64 * 1024



async def get_clipboard(request: Request, query: ClipboardQuery) -> ClipboardResponse | Response:
    selection = query.selection or "clipboard"
    selection_names(selection, location="query", allow_both=False)  # a 400 whatever the desktop's state
    desktop = desktop_of(request)
    text = await desktop.clipboard.get(desktop.session(), selection)
    model = ClipboardResponse(text=text, selection=selection)
    if len(text) <= INLINE_JSON_CHARS:
        return model
    return Response(await asyncio.to_thread(model.to_json), media_type="application/json")


async def set_clipboard(request: Request, body: ClipboardWriteRequest) -> OkResponse:
    selection = body.selection or "clipboard"
    selection_names(selection, location="body", allow_both=True)
    desktop = desktop_of(request)
    await desktop.clipboard.set(desktop.session(), body.text, selection)
    return OkResponse()


OPERATIONS = [
    Operation("GET", "/v1/desktop/clipboard", get_clipboard, "Read the clipboard (or the primary selection) as text",
              query=ClipboardQuery, response=ClipboardResponse, invalid_code=INVALID, errors=(*ERRORS, 504),
              tags=TAGS),
    Operation("POST", "/v1/desktop/clipboard", set_clipboard,
              "Put text on the clipboard, the primary selection or both; answers once the desktop owns it",
              body=ClipboardWriteRequest, response=OkResponse, invalid_code=INVALID, errors=(*ERRORS, 413),
              body_required=True, tags=TAGS),
]
