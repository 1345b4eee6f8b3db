"""Finding the token of a server on this machine, so local clients need no `--token`.

A server started with neither `--token` nor `--no-token` makes a random token, keeps it in a file
only its user can read (`<state dir>/token`), and announces itself in a record named after its
port: `$XDG_STATE_HOME/sandbox-desktop/servers/<port>.json` holding `{"url", "pid", "tokenFile"}`.
A client that talks to a loopback URL and was given no token reads the record for that port, then
the token file. Another local user cannot: both files are mode 0600 in a 0700 directory. See
docs/security.md ("Secure by default").

Standard library only: the readiness probe (`sandbox-desktop ready`) imports this on every run.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
import stat
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_URL = "http://127.0.0.1:2468"
"""Where clients look for a server when given no address."""
URL_ENV = "SANDBOX_DESKTOP_URL"
"""The server's address, for the command line, the MCP server and the readiness probe."""
TOKEN_ENV = "SANDBOX_DESKTOP_TOKEN"
"""The bearer token (else the one a local server announced)."""
DESKTOP_ENV = "SANDBOX_DESKTOP_DESKTOP"
"""The desktop a command-line or MCP client drives (else the default one)."""
TOKEN_FILE_NAME = "token"
_TOKEN_BYTES = 32


def state_home() -> Path:
    """`$XDG_STATE_HOME/sandbox-desktop`, else `~/.local/state/sandbox-desktop`."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "sandbox-desktop"


def record_path(port: int) -> Path:
    """Where the server listening on `port` announces itself."""
    return state_home() / "servers" / f"{port}.json"


def is_loopback_host(host: str) -> bool:
    """`localhost`, `*.localhost` or a loopback address (brackets allowed): this machine only."""
    name = host.strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _private_file(path: Path) -> bool:
    """A regular file of ours that nobody else can read or write (so its content can be trusted)."""
    try:
        info = path.lstat()
    except OSError:
        return False
    return (stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()
            and not info.st_mode & (stat.S_IRWXG | stat.S_IRWXO))


def _write_private(path: Path, text: str) -> None:
    """Write `text` to `path` atomically, readable by its owner only from the first byte."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise


def read_token_file(path: Path) -> str | None:
    """The token in `path` if the file is private and holds one, else None."""
    if not _private_file(path):
        return None
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return token or None


def load_or_create_token(state_dir: Path) -> tuple[str, Path]:
    """The token kept in `<state_dir>/token`, made (random, 32 bytes) if there is no usable one.

    Kept across restarts, so a bookmarked inspector URL keeps working; a file that others could
    read or write is never trusted and is replaced.
    """
    path = state_dir / TOKEN_FILE_NAME
    token = read_token_file(path)
    if token is None:
        token = secrets.token_urlsafe(_TOKEN_BYTES)
        _write_private(path, token + "\n")
    return token, path


def announce(port: int, url: str, token_file: Path) -> Path:
    """Write the record for the server on `port` (replacing a stale one); returns its path."""
    path = record_path(port)
    record = {"url": url, "pid": os.getpid(), "tokenFile": str(token_file)}
    _write_private(path, json.dumps(record) + "\n")
    return path


def withdraw(port: int) -> None:
    """Remove the record for `port` if it is still this process's (a newer server may own it now)."""
    path = record_path(port)
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()


def find_token(url: str) -> str | None:
    """The token of the local server at `url`, if it announced one this user can read; else None."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if not parts.hostname or not is_loopback_host(parts.hostname):
        return None
    path = record_path(port)
    if not _private_file(path):
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    token_file = record.get("tokenFile") if isinstance(record, dict) else None
    return read_token_file(Path(token_file)) if isinstance(token_file, str) else None


def resolve_token(token: str | None, url: str) -> str | None:
    """An explicit token, else `$SANDBOX_DESKTOP_TOKEN`, else the local server's announced token."""
    if token is not None:
        return token or None
    return os.environ.get(TOKEN_ENV) or find_token(url)
