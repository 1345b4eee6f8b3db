"""OpenAI Agents SDK drivers: `DesktopComputer` and `AsyncDesktopComputer`, the `agents.Computer` and
`agents.AsyncComputer` behind its `ComputerTool`, run on a desktop (docs/client.md, "Vendor SDKs").

    pip install 'sandbox-desktop-client[openai-agents]'

Each method is one `POST /v1/desktop/actions` (docs/actions.md), spelled as `POST /v1/desktop/openai/computer`
translates the same action (docs/vendors.md, "OpenAI"), so a model sees the same desktop through either. That
endpoint is not used itself because it answers every call with a screenshot, and the SDK asks for one
separately (`screenshot()`) once a call's actions have run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

# The extra may be missing where the package is type-checked; `unused-ignore` for where it is installed.
from agents import AsyncComputer, Computer  # type: ignore[import-not-found, unused-ignore]

from ._base import Call, actions
from .errors import ApiError

if TYPE_CHECKING:
    from sandbox_desktop_wire.actions import ActionsResponse

    from ._async_endpoints import AsyncEndpoints
    from ._endpoints import Endpoints

__all__ = ["AsyncDesktopComputer", "DesktopComputer"]

BUTTONS = {"left": "left", "right": "right", "wheel": "middle", "back": "back", "forward": "forward"}
"""OpenAI's button names: its `wheel` is the middle button."""
SCROLL_PX_PER_CLICK = 100
"""`scroll_x`/`scroll_y` are pixels; the desktop scrolls in wheel clicks, converted as the OpenAI endpoint does."""
MAX_WHEEL_CLICKS = 100
WAIT_MS = 1000
"""`wait` carries no duration; OpenAI's samples sleep 1-2 s, and the OpenAI endpoint waits 1 s."""
TYPE_DELAY_MS = 10


def wheel_clicks(pixels: int) -> int:
    """Scroll pixels as wheel clicks: rounded to SCROLL_PX_PER_CLICK, at least one when non-zero, at most 100."""
    if pixels == 0:
        return 0
    clicks = min(MAX_WHEEL_CLICKS, max(1, (abs(pixels) + SCROLL_PX_PER_CLICK // 2) // SCROLL_PX_PER_CLICK))
    return clicks if pixels > 0 else -clicks


def key_name(name: str) -> str:
    """An OpenAI key name (`CTRL`, `ENTER`, `ArrowLeft`, `a`) as the desktop's: the desktop takes browser names and
    aliases case-insensitively, but a single upper-case letter would be Shift+letter, and `["CTRL", "A"]` is Ctrl+A."""
    if name == "+":
        return "plus"  # `+` joins a chord's keys
    return name.lower() if len(name) == 1 and name.isalpha() else name


def held(keys: Sequence[str] | None) -> dict[str, Any]:
    return {"modifiers": [key_name(k) for k in keys]} if keys else {}


class Driver:
    """What the sync and async computers share: the wire action for each method and how to read the answer."""

    def __init__(self, dimensions: tuple[int, int] | None, settle: Mapping[str, Any] | None) -> None:
        self._dimensions = dimensions
        # In a declared display, points are pixels of a screenshot of that size (the `image` space), as the
        # OpenAI endpoint maps them; without one, screen pixels and a full-size screenshot.
        self._space = ({"space": "image", "width": dimensions[0], "height": dimensions[1]}
                       if dimensions is not None else None)
        self._settle = dict(settle) if settle is not None else {}

    @property
    def environment(self) -> Literal["ubuntu"] | None:
        """Only the preview tool wants an environment and display size; the GA tool takes screen pixels."""
        return "ubuntu" if self._dimensions is not None else None

    @property
    def dimensions(self) -> tuple[int, int] | None:
        """The declared display (`dimensions=`), or None: screen pixels."""
        return self._dimensions

    def _act(self, *steps: Mapping[str, Any]) -> Call[ActionsResponse]:
        return actions(steps, self._space, None, None)

    def _observe(self) -> Call[ActionsResponse]:
        # The screen settles first: the SDK asks right after the call's last action, before the app redrew.
        size = {"targetWidth": self._dimensions[0], "targetHeight": self._dimensions[1]} if self._dimensions else {}
        return actions([], self._space, self._settle, {"format": "png", **size})

    @staticmethod
    def _done(answer: ActionsResponse) -> ActionsResponse:
        # The batch reports a failed action in the answer, not as an HTTP status; the SDK needs it raised.
        if answer.error is not None:
            problem = answer.error.problem
            raise ApiError(int(problem.get("status", 502)), problem)
        return answer

    @staticmethod
    def _image(answer: ActionsResponse) -> str:
        if answer.screenshot is None:
            raise ApiError(502, {"detail": "the batch answered no screenshot"})
        return answer.screenshot.data

    @staticmethod
    def _click(x: int, y: int, button: str, count: int, keys: Sequence[str] | None) -> dict[str, Any]:
        return {"type": "click", "x": x, "y": y, "button": BUTTONS[button], "count": count, **held(keys)}

    @staticmethod
    def _scroll(x: int, y: int, scroll_x: int, scroll_y: int, keys: Sequence[str] | None) -> dict[str, Any]:
        dx, dy = wheel_clicks(scroll_x), wheel_clicks(scroll_y)
        if dx == 0 and dy == 0:
            return {"type": "move", "x": x, "y": y}
        return {"type": "scroll", "x": x, "y": y, "deltaX": dx, "deltaY": dy, **held(keys)}

    @staticmethod
    def _drag(path: Sequence[tuple[int, int]], keys: Sequence[str] | None) -> dict[str, Any]:
        return {"type": "drag", "path": [{"x": x, "y": y} for x, y in path], **held(keys)}

    @staticmethod
    def _keypress(keys: Sequence[str]) -> dict[str, Any]:
        # One chord, as OpenAI means it: all the keys pressed together.
        return {"type": "key", "keys": "+".join(key_name(k) for k in keys)}


class DesktopComputer(Driver, Computer):  # type: ignore[misc, unused-ignore]
    """`agents.Computer` on a desktop, for `ComputerTool(computer=DesktopComputer(desktop))`.

    `desktop` is a `Client` (its `default` desktop) or a handle from `client.desktops`. `dimensions=(w, h)`
    declares a display for the preview tool (points and screenshots in that size, the screen's aspect ratio);
    `settle` (`{"quietMs", "timeoutMs"}`) is how long `screenshot()` waits for the screen to settle."""

    def __init__(self, desktop: Endpoints, *, dimensions: tuple[int, int] | None = None,
                 settle: Mapping[str, Any] | None = None) -> None:
        super().__init__(dimensions, settle)
        self.desktop = desktop

    def _run(self, call: Call[ActionsResponse]) -> ActionsResponse:
        return self._done(self.desktop.send(call))

    def screenshot(self) -> str:
        return self._image(self._run(self._observe()))

    def click(self, x: int, y: int, button: str = "left", *, keys: list[str] | None = None) -> None:
        self._run(self._act(self._click(x, y, button, 1, keys)))

    def double_click(self, x: int, y: int, *, keys: list[str] | None = None) -> None:
        self._run(self._act(self._click(x, y, "left", 2, keys)))

    def scroll(self, x: int, y: int, scroll_x: int, scroll_y: int, *, keys: list[str] | None = None) -> None:
        self._run(self._act(self._scroll(x, y, scroll_x, scroll_y, keys)))

    def type(self, text: str) -> None:
        self._run(self._act({"type": "type", "text": text, "delayMs": TYPE_DELAY_MS}))

    def wait(self) -> None:
        self._run(self._act({"type": "wait", "durationMs": WAIT_MS}))

    def move(self, x: int, y: int, *, keys: list[str] | None = None) -> None:
        self._run(self._act({"type": "move", "x": x, "y": y}))

    def keypress(self, keys: list[str]) -> None:
        self._run(self._act(self._keypress(keys)))

    def drag(self, path: list[tuple[int, int]], *, keys: list[str] | None = None) -> None:
        self._run(self._act(self._drag(path, keys)))


class AsyncDesktopComputer(Driver, AsyncComputer):  # type: ignore[misc, unused-ignore]
    """`DesktopComputer` as an `agents.AsyncComputer`, on an `AsyncClient` or one of its `desktops` handles."""

    def __init__(self, desktop: AsyncEndpoints, *, dimensions: tuple[int, int] | None = None,
                 settle: Mapping[str, Any] | None = None) -> None:
        super().__init__(dimensions, settle)
        self.desktop = desktop

    async def _run(self, call: Call[ActionsResponse]) -> ActionsResponse:
        return self._done(await self.desktop.send(call))

    async def screenshot(self) -> str:
        return self._image(await self._run(self._observe()))

    async def click(self, x: int, y: int, button: str = "left", *, keys: list[str] | None = None) -> None:
        await self._run(self._act(self._click(x, y, button, 1, keys)))

    async def double_click(self, x: int, y: int, *, keys: list[str] | None = None) -> None:
        await self._run(self._act(self._click(x, y, "left", 2, keys)))

    async def scroll(self, x: int, y: int, scroll_x: int, scroll_y: int, *,
                     keys: list[str] | None = None) -> None:
        await self._run(self._act(self._scroll(x, y, scroll_x, scroll_y, keys)))

    async def type(self, text: str) -> None:
        await self._run(self._act({"type": "type", "text": text, "delayMs": TYPE_DELAY_MS}))

    async def wait(self) -> None:
        await self._run(self._act({"type": "wait", "durationMs": WAIT_MS}))

    async def move(self, x: int, y: int, *, keys: list[str] | None = None) -> None:
        await self._run(self._act({"type": "move", "x": x, "y": y}))

    async def keypress(self, keys: list[str]) -> None:
        await self._run(self._act(self._keypress(keys)))

    async def drag(self, path: list[tuple[int, int]], *, keys: list[str] | None = None) -> None:
        await self._run(self._act(self._drag(path, keys)))
