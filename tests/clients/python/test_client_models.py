"""`Client.model_act` and `AsyncClient`'s twin (`POST /v1/desktop/models/act`) against a real desktop: an open
model's output sent as printed, the pointer read back by xdotool, a refused output raised as an `ApiError`."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from sandbox_desktop_client import ApiError, AsyncClient, Client
from sandbox_desktop_wire.open_models import CoordinateConvention, ModelActionKind, ModelFamily
from tests.api.input.test_keyboard import xdotool
from tests.conftest import ServerProcess, run

DESKTOP = {"displayNum": 387, "width": 1920, "height": 1080}
FAST = {"quietMs": 50, "timeoutMs": 2000}


def pointer(display: str) -> tuple[int, int]:
    fields = dict(part.split(":") for part in xdotool(display, "getmouselocation").split())
    return int(fields["x"]), int(fields["y"])


def test_the_sync_client_runs_a_qwen_tool_call(srv: ServerProcess, display: str) -> None:
    output = '<tool_call>\n{"name": "computer_use", "arguments": {"action": "mouse_move", "coordinate": [966, 546]}}' \
             '\n</tool_call>'
    with Client(srv.url, token=srv.token) as client:
        result = client.model_act(ModelFamily.QWEN25_VL, output, settle=FAST)
        assert pointer(display) == (960, 540)  # 1920x1080 is 1932x1092 to Qwen2.5-VL: its centre is the screen's
        assert [(a.kind, a.x, a.y) for a in result.actions] == [(ModelActionKind.MOVE, 960, 540)]
        assert result.screenshot is not None
        image = Image.open(io.BytesIO(base64.b64decode(result.screenshot.data)))
        assert image.size == (result.model_width, result.model_height) == (1932, 1092)
        with pytest.raises(ApiError) as refused:
            client.model_act("opencua", "pyautogui.click(x=eval('1'), y=2)")
        assert refused.value.status == 422 and "argument x is not a literal" in str(refused.value)


def test_the_async_client_runs_ui_tars_on_a_desktop_handle(srv: ServerProcess, display: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(srv.url, token=srv.token) as client:
            desk = client.desktops.attach("default")
            result = await desk.model_act("ui-tars-1.0", "Thought: go\nAction: hover(start_box='(250,750)')",
                                          screenshot=False, settle=FAST)
            assert result.convention is CoordinateConvention.GRID_1000 and result.thought == "go"
            assert result.screenshot is None
            final = await desk.model_act("ui-tars-1.0", "Thought: done\nAction: finished(content='ok')")
            assert final.final is not None and final.final.content == "ok"

    run(scenario)
    assert pointer(display) == (480, 810)
