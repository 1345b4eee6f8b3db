"""desktop/x11/wakeup.py: a wake-up told after its thread closed it writes nowhere, though its number lives on."""

from __future__ import annotations

import socket
import threading

from desktop.x11.wakeup import Wakeup


def test_a_wake_after_close_never_reaches_the_file_that_took_the_number() -> None:
    wakeup = Wakeup()
    number = wakeup._fd
    wakeup.close()
    ours, theirs = socket.socketpair()  # the lowest free numbers: the eventfd's is one of them
    try:
        assert number in (ours.fileno(), theirs.fileno())
        wakeup.wake()
        for sock in (ours, theirs):
            sock.setblocking(False)
            try:
                got = sock.recv(64)
            except BlockingIOError:
                continue
            raise AssertionError(f"a closed wake-up wrote {got!r} into another socket")
    finally:
        ours.close()
        theirs.close()


def test_wakes_from_other_threads_end_a_sleep_until_closed() -> None:
    wakeup = Wakeup()
    waker = threading.Thread(target=wakeup.wake)
    waker.start()
    wakeup.sleep(10)  # returns at the wake, long before the timeout
    waker.join()
    wakeup.clear()
    wakeup.close()
    wakeup.close()  # twice: the owner's end and a stop racing it
    wakeup.wake()
