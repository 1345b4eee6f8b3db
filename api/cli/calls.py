"""The CLI's requests: one call over the standard library (urllib), its answer written out, and every failure
one `error:` line on stderr with an exit status (docs/cli.md, Output and exit status).

Not httpx: a client command costs a Python start plus this, not the HTTP client's and pydantic's imports
(the figures are in docs/cli.md). Answers are shown by their Content-Type: JSON indented, text as it is,
Server-Sent Events one `data` line each, binary to `-o FILE` or a pipe.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlencode

from api.cli.operation_args import Command, UsageError, request, timeout
from sandbox_desktop_client.local_servers import resolve_token

if TYPE_CHECKING:  # urllib.request (with http.client, ssl, email) is imported when a request is made, not for --help
    import http.client

CHUNK = 1 << 20
Progress = Callable[[int, int | None], None]
"""Called after each chunk written with (bytes so far, total bytes or None)."""


class Failure(Exception):
    """What the CLI reports as `error: <message>` and exits with `status`: 1 for an error answer or bad input,
    2 when no answer came."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def not_the_api(url: str, what: str) -> Failure:
    return Failure(f"the answer from {url} is not what sandbox-desktop sends ({what}): is --url the server's address?")


def is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


def problem_failure(status: int, reason: str, raw: bytes) -> Failure:
    """`<detail> (<code>, HTTP <status>)`, then one line per invalid field when there are several."""
    try:
        problem = json.loads(raw)
    except ValueError:
        problem = None
    if not isinstance(problem, dict):
        problem = {"detail": raw.decode("utf-8", "replace").strip()[:1000] or reason}
    code = problem.get("code") if isinstance(problem.get("code"), str) else None
    text = f"{problem.get('detail') or problem.get('title') or f'HTTP {status}'} ({code or 'error'}, HTTP {status})"
    errors = problem.get("errors")
    if isinstance(errors, list) and len(errors) > 1:
        text += "".join(f"\n  {e.get('location', '')}.{e.get('field', '')}: {e.get('message', '')}"
                        for e in errors if isinstance(e, dict))
    return Failure(text)


class Answer:
    """A 2xx answer, not read yet."""

    def __init__(self, url: str, response: http.client.HTTPResponse) -> None:
        self.url = url
        self.response = response
        self.status = response.status
        self.headers = response.headers
        self.media = (response.headers.get("content-type") or "").split(";")[0].strip().lower()

    def json(self) -> Any:
        if not is_json(self.media):
            raise not_the_api(self.url, f"Content-Type {self.media or 'none'}")
        try:
            return json.loads(self.response.read())
        except ValueError as e:
            raise not_the_api(self.url, f"not JSON: {e}") from None

    def header(self, name: str) -> str:
        value = self.headers.get(name)
        if value is None:
            raise not_the_api(self.url, f"no {name} header")
        return str(value)

    def copy(self, out: IO[bytes], progress: Progress | None = None) -> None:
        length = self.headers.get("content-length")
        total = int(length) if length and length.isdigit() else None
        done = 0
        while chunk := self.response.read(CHUNK):
            out.write(chunk)
            out.flush()
            done += len(chunk)
            if progress is not None:
                progress(done, total)

    def events(self) -> Iterator[str]:
        """The `data` of each Server-Sent Event, as it arrives."""
        data: list[str] = []
        for raw in self.response:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not line:
                if data:
                    yield "\n".join(data)
                data = []
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))


class Api:
    """The server at `url`: one request per `send`."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip("/")
        self.token = token
        import urllib.request

        class NoRedirects(urllib.request.HTTPRedirectHandler):
            """The API never redirects: a 3xx is another server's answer, an error rather than followed."""

            def redirect_request(self, *args: Any, **kwargs: Any) -> None:
                return None

        self.opener = urllib.request.build_opener(NoRedirects)

    def send(self, method: str, path: str, *, query: Sequence[tuple[str, str]] = (), body: Any = None,
             data: IO[bytes] | None = None, headers: dict[str, str] | None = None,
             timeout: float | None = 60.0) -> Answer:
        """The 2xx answer; `Failure` for an error answer (1) or none at all (2)."""
        import http.client
        import urllib.error
        import urllib.request

        url = self.url + path + (f"?{urlencode(query)}" if query else "")
        headers = {"User-Agent": "sandbox-desktop-cli", **(headers or {})}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        payload: Any = data
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=payload, headers=headers, method=method)
        try:
            response = self.opener.open(req, timeout=timeout)
        except urllib.error.HTTPError as e:
            with e:
                raise problem_failure(e.code, str(e.reason), e.read()) from None
        except urllib.error.URLError as e:
            if isinstance(e.reason, TimeoutError):
                raise Failure(f"talking to {self.url} failed: timed out", 2) from None
            raise Failure(f"cannot reach the server at {self.url}: is `sandbox-desktop server` running?", 2) from None
        except (http.client.HTTPException, OSError) as e:  # a dropped connection, a timeout, a garbled answer
            raise Failure(f"talking to {self.url} failed: {e or type(e).__name__}", 2) from None
        return Answer(self.url, response)


@contextlib.contextmanager
def output(target: str | None) -> Iterator[IO[bytes]]:
    """Standard output, or the file `target` (removed again if writing it fails: no partial file)."""
    if target in (None, "-"):
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    path = Path(target)
    with open(path, "wb") as f:
        try:
            yield f
        except BaseException:
            f.close()
            path.unlink(missing_ok=True)
            raise


def unprintable(media: str) -> bool:
    """An answer no terminal should be sent, whatever its bytes: an image, a video, a zip."""
    return media.startswith(("image/", "video/", "audio/")) or media == "application/zip"


def save(answer: Answer, target: str | None, progress: Progress | None = None) -> None:
    """A binary answer to `target`; to a terminal only what holds no NUL byte in its first chunk (a text file
    read with `fs read`), as curl decides."""
    first = b""
    if target is None and sys.stdout.isatty():
        first = answer.response.read(CHUNK)
        if unprintable(answer.media) or b"\0" in first:
            raise Failure(f"the answer is binary ({answer.media}): write it with -o FILE, or pipe it")
    with output(target) as out:
        out.write(first)
        answer.copy(out, progress)
    if target not in (None, "-"):
        print(target, flush=True)


def write_json(value: Any, target: str | None) -> None:
    """Indented JSON to standard output, or to the file `target` (its name printed)."""
    with output(target) as out:
        out.write(json.dumps(value, indent=2, ensure_ascii=False).encode() + b"\n")
    if target not in (None, "-"):
        print(target, flush=True)


def show(command: Command, answer: Answer, target: str | None) -> None:
    """Write an operation's answer by its Content-Type."""
    media = answer.media
    if answer.status == 204:
        return
    if media.startswith("text/") and media not in command["media"] and media != "text/event-stream":
        raise not_the_api(answer.url, f"Content-Type {media}")  # another web server's page
    if media == "text/event-stream":
        with output(target) as out:
            for data in answer.events():
                out.write(data.encode() + b"\n")
                out.flush()
    elif is_json(media):
        write_json(answer.json(), target)
    elif media.startswith("text/"):
        with output(target) as out:
            answer.copy(out)
    else:
        save(answer, target)


def upload(command: Command, args: argparse.Namespace) -> tuple[IO[bytes] | None, dict[str, str]]:
    """The file (or standard input) an upload sends, and its headers."""
    if not command["upload"]:
        return None, {}
    name = args.input or "-"
    if name == "-":
        if sys.stdin.isatty():
            raise UsageError("give the bytes to send with -i FILE, or on standard input")
        return sys.stdin.buffer, {"Content-Type": command["upload"][0]}
    f = open(name, "rb")  # noqa: SIM115 - read while the request is sent, closed at exit
    return f, {"Content-Type": command["upload"][0], "Content-Length": str(os.fstat(f.fileno()).st_size)}


def call(api: Api, command: Command, args: argparse.Namespace) -> Answer:
    """Send the request the parsed arguments of an operation's command make."""
    path, query, body = request(command, args)
    data, headers = upload(command, args)
    if getattr(args, "range", None):
        headers["Range"] = args.range
    return api.send(command["op"].split(" ", 1)[0], path, query=query, body=body, data=data, headers=headers,
                    timeout=timeout(command, args, query, body))


def run(args: argparse.Namespace, action: Callable[[Api, argparse.Namespace], None]) -> int:
    """Run a client command: 0 when done, 1 for an error answer or bad input, 2 if unreachable or misused.

    Every failure is a non-zero exit with one `error:` line on stderr, never a traceback (docs/cli.md)."""
    import http.client

    try:
        action(Api(args.url, resolve_token(args.token, args.url)), args)
    except UsageError as e:
        args.parser.error(str(e))  # exits 2 with the command's usage
    except Failure as e:
        print(f"error: {e}", file=sys.stderr)
        return e.status
    except BrokenPipeError:  # `| head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (TimeoutError, ConnectionError, http.client.HTTPException) as e:  # the answer broke off
        print(f"error: talking to {args.url} failed: {e or type(e).__name__}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:  # a file that cannot be written, an id that is no id
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # ending a stream (events, followed logs)
        return 130
    return 0


def run_operation(api: Api, args: argparse.Namespace) -> None:
    """The generic command: the operation's request, its answer written out."""
    command: Command = args.operation
    if args.output is None and sys.stdout.isatty() and all(unprintable(m) for m in command["media"]):
        raise UsageError("the answer is binary: write it with -o FILE, or pipe it")  # before asking for it
    show(command, call(api, command, args), args.output)
