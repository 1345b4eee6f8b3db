"""The Python client's calls for windows, the screen size, files into apps, clipboard images and approvals,
against a live server (their endpoints are tested in depth by their own modules; this checks the calls)."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image

from sandbox_desktop_client import Client, ConflictError, NotFoundError
from sandbox_desktop_wire.approvals import ApprovalStatus, Decision
from tests.conftest import ServerProcess, wait_for

DESKTOP = {"displayNum": 327, "width": 800, "height": 600}


@pytest.fixture(scope="module")
def desk(srv: ServerProcess) -> Iterator[Client]:
    with Client(srv.url, token=srv.token) as client:
        yield client


@pytest.fixture
def xterm(desk: Client) -> Iterator[str]:
    launched = desk.launch("xterm", ["-geometry", "60x15+40+40", "-title", "client-people"], wait=True)
    assert launched.window_id is not None
    yield launched.window_id
    if any(w.id == launched.window_id for w in desk.windows(minimized=True)):
        desk.close_window(launched.window_id, timeout_ms=500)


def test_window_calls(desk: Client, xterm: str) -> None:
    [listed] = desk.windows(title_regex="^client-people$")
    assert listed.id == xterm and desk.windows(class_name="xterm", title_regex="people")
    shot = desk.window_screenshot(xterm)
    assert shot.window_id == xterm and shot.region[2:] == (listed.width, listed.height)
    assert Image.open(io.BytesIO(shot.data)).size == (listed.width, listed.height)
    assert desk.minimize_window(xterm).minimized is True
    assert not desk.windows(title_regex="^client-people$") and desk.windows(title_regex="people", minimized=True)
    with pytest.raises(ConflictError) as refused:
        desk.window_screenshot(xterm)
    assert refused.value.code == "window_not_viewable"
    assert desk.restore_window(xterm).minimized is False
    assert desk.set_always_on_top(xterm).always_on_top is True
    assert desk.set_always_on_top(xterm, enabled=False).always_on_top is False
    assert desk.maximize_window(xterm).maximized is True
    assert desk.raise_window(xterm).id == xterm
    closed = desk.close_window(xterm, timeout_ms=2000)
    assert closed.closed and not closed.forced


def test_screen_size(desk: Client) -> None:
    changed = desk.set_display(640, 480)
    try:
        assert (changed.width, changed.height) == (640, 480) and changed.max_width >= 800
        status = desk.status()
        assert status.resolution is not None and (status.resolution.width, status.resolution.height) == (640, 480)
    finally:
        desk.set_display(800, 600)


def test_clipboard_image_and_drop(desk: Client, tmp_path: Any) -> None:
    out = io.BytesIO()
    Image.new("RGB", (7, 5), (200, 30, 40)).save(out, "PNG")
    desk.set_clipboard("with a picture", image=out.getvalue())
    assert desk.clipboard_image() == out.getvalue() and desk.clipboard() == "with a picture"
    desk.set_clipboard("text only")
    with pytest.raises(NotFoundError):
        desk.clipboard_image()
    with pytest.raises(ValueError):
        desk.set_clipboard()
    dropped = tmp_path / "dropped.txt"
    dropped.write_text("x")
    with pytest.raises(ConflictError) as nothing_there:
        desk.drop([str(dropped)], 5, 590)  # the root window: no XDND target
    assert nothing_there.value.code == "no_drop_target"
    with pytest.raises(NotFoundError):
        desk.fill_file_dialog(str(dropped), timeout_ms=500)


def test_approvals(server_factory: Any) -> None:
    server = server_factory("--approve", "pointer")
    with Client(server.url, token=server.token) as admin:
        admin.start(width=640, height=480)
        answers: dict[str, Any] = {}

        def agent() -> None:
            with Client(server.url, token=server.token) as held:
                try:
                    answers["move"] = held.move(10, 10)
                except Exception as exc:  # denied: the 403 the agent reads
                    answers["error"] = exc

        for decision in (Decision.APPROVE, Decision.DENY):
            thread = threading.Thread(target=agent)
            thread.start()
            pending = wait_for(lambda: admin.approvals(status=ApprovalStatus.PENDING), "a held move")
            assert admin.approval(pending[0].id).action.kinds == ["pointer"]
            decided = admin.decide(pending[0].id, decision, message="not now" if decision == Decision.DENY else None)
            thread.join(30)
            assert decided.status in (ApprovalStatus.APPROVED, ApprovalStatus.DENIED)
            with pytest.raises(ConflictError):
                admin.decide(pending[0].id, Decision.APPROVE)
        assert answers["move"].x == 10 and "not now" in str(answers["error"])
