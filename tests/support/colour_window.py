"""A plain coloured window of the test's own X client, on any desktop: its pixels are what the test says.

Override-redirect, so no window manager moves or decorates it: a capture shows `rgb` exactly over its rectangle.
"""

from __future__ import annotations

from Xlib import X
from Xlib import display as xdisplay


class ColourWindow:
    def __init__(self, display_name: str, rect: tuple[int, int, int, int], rgb: tuple[int, int, int]) -> None:
        self.display = xdisplay.Display(display_name)
        screen = self.display.screen()
        self._colormap = screen.default_colormap
        x, y, width, height = rect
        self.window = screen.root.create_window(x, y, width, height, 0, screen.root_depth, X.InputOutput,
                                                X.CopyFromParent, background_pixel=self._pixel(rgb),
                                                override_redirect=True)
        self.window.map()
        self.display.sync()

    def _pixel(self, rgb: tuple[int, int, int]) -> int:
        red, green, blue = (c * 257 for c in rgb)
        return int(self._colormap.alloc_color(red, green, blue).pixel)

    def fill(self, rgb: tuple[int, int, int]) -> None:
        """Paint the whole window `rgb`."""
        self.window.change_attributes(background_pixel=self._pixel(rgb))
        self.window.clear_area(0, 0, 0, 0)
        self.display.sync()

    def close(self) -> None:
        self.display.close()
