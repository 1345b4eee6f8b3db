"""A request the HTTP parser refuses is answered with a problem document, as every other caller mistake is.

uvicorn answers what httptools cannot parse (a `Content-Length` of letters, a header line without a colon, a bad
request line) before any app sees it, with a plain-text 400 "Invalid HTTP request received.". Here the same 400,
with the same closing of the connection, carries the problem document of docs/errors.md instead: code
`invalid_request`, naming the request's framing as the field at fault.

It replaces a method of uvicorn's httptools protocol, so it is installed only on the uvicorn it was written against
(api/cli/uvicorn_pin.py); any other keeps its plain 400.
"""

from __future__ import annotations

import json
from typing import Any

from uvicorn.protocols.http import httptools_impl

from api.cli.uvicorn_pin import pinned
from api.http.problems import PROBLEM_MEDIA_TYPE, problem_document
from desktop.core.errors import FieldError


def refusal(message: str) -> bytes:
    """The problem document of a request refused by the HTTP parser, as the bytes of a 400 response's body."""
    error = FieldError([{"location": "request", "field": "request", "message": f"not valid HTTP/1.1 ({message})",
                         "type": "http_framing"}])
    return json.dumps(problem_document(error), ensure_ascii=False).encode()


def _send_400_response(self: Any, msg: str) -> None:
    body = refusal(msg.rstrip("."))
    content = [httptools_impl.STATUS_LINE[400]]
    for name, value in self.server_state.default_headers:
        content.extend([name, b": ", value, b"\r\n"])
    content.extend([b"content-type: " + PROBLEM_MEDIA_TYPE.encode() + b"\r\n",
                    b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                    b"connection: close\r\n", b"\r\n", body])
    self.transport.write(b"".join(content))
    self.transport.close()


def install() -> bool:
    """Make uvicorn's httptools protocol refuse unparseable requests with a problem document; False on another
    uvicorn (left as it is)."""
    if not pinned():
        return False
    httptools_impl.HttpToolsProtocol.send_400_response = _send_400_response  # type: ignore[method-assign]
    return True
