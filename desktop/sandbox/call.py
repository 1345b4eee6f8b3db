"""A `Call` from the server's side: a function run in a child of the process that serves a sandbox's requests
(its init, or its serving process where the init is a reaper only: desktop/sandbox/serving.py), as the
sandbox's user.

The child answers on a socket of the call's own (desktop/sandbox/init.py), never on the init's, so that a long
call holds up nothing else and a process of the sandbox's uid never holds the init's socket. What it answers
is a JSON object (a `Result`, read from a memfd when it is larger than a message) and descriptors: data that
passed through a process of that uid, which the caller checks field by field and never runs.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from desktop.sandbox import protocol
from desktop.sandbox.channel import SandboxGone, one_answer

MAX_ANSWER_BYTES = 256 << 20
"""A spilled answer (the listing of a huge folder) is read up to this."""


async def run_call(send: Callable[[protocol.Call, list[int]], Awaitable[None]], function: str,
                   args: Mapping[str, Any], fds: Sequence[int], cgroups: Sequence[str]
                   ) -> tuple[dict[str, Any], list[int]]:
    """Send the `Call` with `send` (to whoever serves the sandbox's requests: desktop/sandbox/serving.py) and
    wait for its answer on the call's own socket: the JSON object and the descriptors the function sent (the
    caller's to close). Raises OSError (errno 0: the function raised) or SandboxGone."""
    call = protocol.Call(0, function, dict(args), tuple(cgroups))
    try:
        message, received = await one_answer(lambda answer: send(call, [answer, *fds]))
    except SandboxGone:
        raise SandboxGone("the call in the desktop's sandbox ended without an answer") from None
    if isinstance(message, protocol.Result):
        if not message.spilled:
            return message.value or {}, received
        try:
            return await _spilled(received), received[1:]
        except BaseException:
            for fd in received[1:]:
                os.close(fd)
            raise
    for fd in received:
        os.close(fd)
    if isinstance(message, protocol.Failed):
        raise OSError(message.errno, f"{message.message} ({message.stage})")
    raise SandboxGone(f"the call in the desktop's sandbox answered {message.kind!r}")


async def _spilled(fds: list[int]) -> dict[str, Any]:
    """An answer too large for a message, read from the memfd that comes first (and closed)."""
    if not fds:
        raise SandboxGone("a call's answer was spilled, with nothing to read it from")
    spill = fds[0]

    def read() -> object:
        try:
            size = os.fstat(spill).st_size
            if size > MAX_ANSWER_BYTES:
                raise OSError(errno.EFBIG, f"the answer of {size} bytes is over {MAX_ANSWER_BYTES}")
            return json.loads(os.pread(spill, size, 0))
        finally:
            os.close(spill)

    value = await asyncio.to_thread(read)
    if not isinstance(value, dict):
        raise SandboxGone("a call's answer is not a JSON object")
    return value
