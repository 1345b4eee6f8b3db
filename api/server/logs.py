"""Server logging: plain text or one JSON object per line, with secrets redacted from every message."""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
SECRET = re.compile(r"((?:access_token|token)=|Bearer\s+)[^\s&\"']+", re.IGNORECASE)
"""A token in a URL query or an Authorization header value, wherever a library puts one into a message."""
SECRET_HEADER = re.compile(r"((?:proxy-)?authorization:\s*)(?!Bearer\s)\S.*", re.IGNORECASE)
"""A whole credentials header as websockets logs it at debug level (`< authorization: Token abc`), any scheme."""
STANDARD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message", "asctime", "color_message"}  # uvicorn's ANSI-coloured copy of the message


SECRET_MARK = re.compile(r"token=|bearer|authorization", re.IGNORECASE)
"""What one of the secret patterns above needs in its text, matched as they match (a case-insensitive regex: a
lowered copy would miss what they catch, such as a dotless i): a message without it has nothing to redact."""


def redact(text: str) -> str:
    # Every message passes here, an access line per request among them: the two substitutions cost ~25 us of CPU
    # a request on the server's cold caches (bench/http_servers.py; docs/benchmarks.md "Where the floor goes"),
    # the search for their marks a fraction of that.
    if SECRET_MARK.search(text) is None:
        return text
    return SECRET_HEADER.sub(r"\1[redacted]", SECRET.sub(r"\1[redacted]", text))


class RedactingFilter(logging.Filter):
    """Replaces tokens in a record's message before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


class DenialNoiseFilter(logging.Filter):
    """Drops uvicorn's error line after a WebSocket we refused with an HTTP answer (401, 409).

    Its sans-io implementation counts only an accepted handshake as complete, so every correct
    denial response (the ASGI websocket.http.response extension) is followed by a false ERROR.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != "ASGI callable returned without completing handshake."


class JsonFormatter(logging.Formatter):
    """`{"ts", "level", "logger", "message", ...extra fields}` on one line, for log collectors."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in record.__dict__.items() if k not in STANDARD_ATTRS and not k.startswith("_")})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure_logging(level: str, fmt: str) -> None:
    """Send every logger (ours, uvicorn's, aiortc's) to stderr in `fmt`, at `level` and above."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.error").addFilter(DenialNoiseFilter())
