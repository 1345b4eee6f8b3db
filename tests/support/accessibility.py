"""The accessibility API as the black-box tests call it: find elements, act on one (docs/accessibility.md)."""

from __future__ import annotations

from typing import Any

import httpx

FIND = "/v1/desktop/accessibility/find"
ACT = "/v1/desktop/accessibility/act"


def find(api: httpx.Client, **query: Any) -> list[dict[str, Any]]:
    """The elements matching `query` (the find request's fields) now; the request must be accepted."""
    response = api.post(FIND, json=query)
    assert response.status_code == 200, response.text
    elements: list[dict[str, Any]] = response.json()["elements"]
    return elements


def act(api: httpx.Client, element: Any, action: str, **extra: Any) -> dict[str, Any]:
    """Act on `element` (an id or a query); the action must succeed: its answer."""
    response = api.post(ACT, json={"element": element, "action": action, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body
