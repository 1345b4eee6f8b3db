"""An open computer-use model's output as a `Call` (docs/vendors.md, "Open models"): what the model printed goes to
the server as it is, which parses it (never runs it) and acts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox_desktop_wire.open_models import CoordinateConvention, ModelActResult, ModelFamily

from ._base import Call, model, wire


def model_act(family: ModelFamily | str, text: str, convention: CoordinateConvention | str | None,
              factor: int | None, min_pixels: int | None, max_pixels: int | None, screenshot: bool | None,
              search_url: str | None, settle: Mapping[str, Any] | None) -> Call[ModelActResult]:
    body = wire(family=str(family), text=text, convention=None if convention is None else str(convention),
                factor=factor, min_pixels=min_pixels, max_pixels=max_pixels, screenshot=screenshot,
                search_url=search_url, settle=dict(settle) if settle is not None else None)
    # A model's `wait` may ask for up to a minute; the settle's timeout comes on top.
    return Call("POST", "/v1/desktop/models/act", model(ModelActResult), json=body, extra_timeout=65)
