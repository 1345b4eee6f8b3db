"""A local web page in Chromium on the test's desktop: found and filled by element, and checked by pixels."""

from __future__ import annotations

import io
from typing import Any

from PIL import Image

from pytest_sandbox_desktop import Desktop


def test_an_order_is_saved_by_element(desktop: Desktop, order_page: dict[str, Any]) -> None:
    desktop.act({"role": "textbox", "name": "Customer name"}, "setValue", value="Ada Lovelace")
    desktop.act({"role": "button", "name": "Save"}, "click")

    desktop.expect_element(name_contains="Saved order for Ada Lovelace", timeout=15)


def test_the_save_button_is_green_and_saving_redraws_the_status(desktop: Desktop,
                                                                order_page: dict[str, Any]) -> None:
    save = desktop.expect_element(role="button", name="Save")["bounds"]
    shot = Image.open(io.BytesIO(desktop.screenshot().data)).convert("RGB")
    red, green, blue = shot.getpixel((save["x"] + save["width"] // 2, save["y"] + save["height"] // 2))  # type: ignore[misc]
    assert green > 120 and red < 60 and blue < 60, "the centre of the Save button is green"

    status = desktop.expect_element(name_contains="Nothing saved yet")["bounds"]
    with desktop.expect_screen_change(region=(status["x"], status["y"], status["width"], status["height"])):
        desktop.act({"role": "button", "name": "Save"}, "click")  # no name yet: the page says so
    desktop.expect_element(name_contains="A name is required")
