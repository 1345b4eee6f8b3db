"""Anthropic SDK drivers: `DesktopToolset` and `AsyncDesktopToolset`, the `computer_toolset_20260801` toolset of
the SDK's tool runner, run on a desktop (docs/client.md, "Vendor SDKs").

    pip install 'sandbox-desktop-client[anthropic]'

Each member call is one `POST /v1/desktop/anthropic/computer` (docs/vendors.md): the server already speaks this
toolset member by member, maps points from the toolset's screenshot space and scales its screenshots to the model's
image limits, so the driver only forwards the parsed input and reads the answer back into the SDK's result types.
A pure action answers no image, so no screenshot is taken that the model did not ask for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from anthropic.tools import (
    BetaAbstractComputerToolset20260801,
    BetaAsyncAbstractComputerToolset20260801,
    BetaComputerCursorPositionResult,
    BetaScreenshotResult,
    ToolError,
)

from ._base import Call

if TYPE_CHECKING:
    from anthropic.tools import BetaComputerConfirmCallable, BetaToolConfigs, BetaToolsetCallContext
    from anthropic.types.beta import BetaComputerMemberInput, BetaComputerToolsetConfigsParam

    from ._async_endpoints import AsyncEndpoints
    from ._endpoints import Endpoints

__all__ = ["AsyncDesktopToolset", "DesktopToolset"]

PATH = "/v1/desktop/anthropic/computer"
CURSOR = re.compile(r"X=(-?\d+),Y=(-?\d+)")
SETTLE_S = 5.0
"""The server's default settle limit (docs/vendors.md): added to the client's timeout for a screenshot."""


def member_call(tool: Mapping[str, Any], name: str, input: BetaComputerMemberInput,
                settle: Mapping[str, Any] | None) -> Call[dict[str, Any]]:
    """The endpoint's request for one member call: the `tools[]` entry as the SDK sends it (so a member the
    caller disabled in `configs` is refused by the server too), the member and its input."""
    body: dict[str, Any] = {"tool": dict(tool), "name": name, "input": input.model_dump(exclude_none=True)}
    if settle is not None:
        body["settle"] = dict(settle)
    # `wait` and `hold_key` last up to 100 s on the server: the client's own timeout must outlast them.
    duration = float(getattr(input, "duration", 0) or 0)
    limit = float((settle or {}).get("timeoutMs", SETTLE_S * 1000)) / 1000
    return Call("POST", PATH, lambda r: dict(r.json()), json=body, extra_timeout=duration + limit)


def result(name: str, answer: dict[str, Any]) -> BetaScreenshotResult | BetaComputerCursorPositionResult | None:
    """The endpoint's `tool_result` content as what the SDK's member returns; the SDK renders it again.

    A pure action returns None: its acknowledgement (`Clicked.`) is the SDK's own text, which the server's
    matches, so returning it would make the model read it twice."""
    content = list(answer.get("content") or [])
    text = " ".join(str(b.get("text", "")) for b in content if b.get("type") == "text")
    if answer.get("is_error"):
        # Forwarded as the model's error result, as the endpoint intends (docs/vendors.md, "Errors").
        raise ToolError(text or f"{name} failed")
    for block in content:
        if block.get("type") == "image":
            source = block["source"]
            return BetaScreenshotResult(data=source["data"], media_type=source["media_type"])
    if name == "cursor_position":
        found = CURSOR.search(text)
        if found is None:
            raise ToolError(f"cursor_position: unexpected answer {text!r}")
        return BetaComputerCursorPositionResult(x=int(found[1]), y=int(found[2]))
    return None


class DesktopToolset(BetaAbstractComputerToolset20260801):
    """`computer_toolset_20260801` on a desktop, for `Anthropic().beta.messages.tool_runner(tools=[...])`.

    `desktop` is a `Client` (its `default` desktop) or a handle from `client.desktops`. `confirm`, `configs`
    and `tool_configs` are the SDK's: the SDK requires `confirm` while `type`, `key` or `hold_key` is enabled.
    `settle` (`{"quietMs", "timeoutMs"}`) is how long a `screenshot` waits for the screen to settle."""

    def __init__(self, desktop: Endpoints, *, confirm: BetaComputerConfirmCallable | None = None,
                 configs: BetaComputerToolsetConfigsParam | None = None,
                 tool_configs: BetaToolConfigs | None = None, settle: Mapping[str, Any] | None = None) -> None:
        super().__init__(configs=configs, confirm=confirm, tool_configs=tool_configs)
        self.desktop = desktop
        self.settle = settle

    # Overriding `execute` serves every member at once: one request each, whatever the member.
    def execute(self, context: BetaToolsetCallContext, name: str,
                input: BetaComputerMemberInput) -> Any:
        return result(name, self.desktop.send(member_call(self.to_dict(), name, input, self.settle)))


class AsyncDesktopToolset(BetaAsyncAbstractComputerToolset20260801):
    """`DesktopToolset` for `AsyncAnthropic`, on an `AsyncClient` or one of its `desktops` handles."""

    def __init__(self, desktop: AsyncEndpoints, *, confirm: BetaComputerConfirmCallable | None = None,
                 configs: BetaComputerToolsetConfigsParam | None = None,
                 tool_configs: BetaToolConfigs | None = None, settle: Mapping[str, Any] | None = None) -> None:
        super().__init__(configs=configs, confirm=confirm, tool_configs=tool_configs)
        self.desktop = desktop
        self.settle = settle

    async def execute(self, context: BetaToolsetCallContext, name: str,
                      input: BetaComputerMemberInput) -> Any:
        return result(name, await self.desktop.send(member_call(self.to_dict(), name, input, self.settle)))
