"""desktop/core/loops.py: a thread's call reaches the loop, and a missing or closed loop is no error."""

from __future__ import annotations

import asyncio
import threading

from desktop.core.loops import call_soon_from_thread


def test_a_call_from_a_thread_runs_on_the_loop() -> None:
    async def scenario() -> tuple[int, tuple[object, ...]]:
        loop = asyncio.get_running_loop()
        ran: asyncio.Future[tuple[int, tuple[object, ...]]] = loop.create_future()

        def callback(*args: object) -> None:
            ran.set_result((threading.get_ident(), args))

        thread = threading.Thread(target=call_soon_from_thread, args=(loop, callback, "x", 1))
        thread.start()
        thread.join()
        return await asyncio.wait_for(ran, 5)

    ident, args = asyncio.run(scenario())
    assert ident == threading.get_ident() and args == ("x", 1)  # the loop's thread (this one), with the arguments


def test_no_loop_or_a_closed_one_drops_the_call() -> None:
    called: list[object] = []
    call_soon_from_thread(None, called.append, 1)
    loop = asyncio.new_event_loop()
    loop.close()
    call_soon_from_thread(loop, called.append, 2)
    assert called == []
