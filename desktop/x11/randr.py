"""Changing the screen size of a running X server with RandR 1.2 (docs/display.md).

Xvfb's RandR allows any size from 1x1 up to the size it was started with (`-screen`), so the server
is started at the largest size the desktop may take (its framebuffer) and switched to the asked size
at once. A switch is what `xrandr --newmode/--addmode/--output --mode` does: create a mode (timings
from a VESA CVT modeline, which only matters to servers that check pixel clocks, like Xorg's dummy
driver), add it to the output, point the CRTC at it and set the screen size. Every function here runs
as one short job on the thread that owns the connection (desktop/x11/thread.py): X requests and their
replies only, never a sleep.
"""

from __future__ import annotations

from dataclasses import dataclass

from Xlib import X, Xatom
from Xlib.display import Display
from Xlib.ext import randr

from desktop.core.errors import DesktopFailed, InvalidAction, field_errors

REFRESH_HZ = 60.0
MODE_SUFFIX = "_60.00"
MM_PER_INCH = 25.4

# VESA CVT 1.1 constants (as in the X server's own `cvt`), non-reduced blanking.
_H_GRANULARITY = 8
_MIN_V_PORCH = 3
_MIN_V_BACK_PORCH = 6
_MIN_VSYNC_BP_US = 550.0
_HSYNC_PERCENT = 8
_CLOCK_STEP_KHZ = 250
_C_PRIME = 30.0
_M_PRIME = 300.0
_RR_HSYNC_NEGATIVE = 0x2
_RR_VSYNC_POSITIVE = 0x4


@dataclass(frozen=True)
class ModeLine:
    """One display mode's timings, as `cvt` prints them (pixel clock in kHz)."""

    width: int
    height: int
    dot_clock_khz: int
    h_sync_start: int
    h_sync_end: int
    h_total: int
    v_sync_start: int
    v_sync_end: int
    v_total: int

    @property
    def name(self) -> str:
        """As `cvt` names its modes; the suffix also tells the modes made here from the server's own."""
        return f"{self.width}x{self.height}{MODE_SUFFIX}"


@dataclass(frozen=True)
class ScreenGeometry:
    """The screen as the X server reports it."""

    width: int
    height: int
    max_width: int
    max_height: int
    """The largest size RandR accepts (for Xvfb: the size it was started with)."""


@dataclass(frozen=True)
class DisplayChange:
    """A screen size change the X server applied (`Desktop.set_display`)."""

    width: int
    height: int
    dpi: int
    max_width: int
    max_height: int
    elapsed_s: float
    """From the request to the X server's confirmation."""


def _vsync_lines(width: int, height: int) -> int:
    """CVT's vertical sync width, which encodes the aspect ratio (exact ratios only, as CVT has it)."""
    for numerator, denominator, lines in ((4, 3, 4), (16, 9, 5), (16, 10, 6), (5, 4, 7), (15, 9, 7)):
        if height % denominator == 0 and height * numerator // denominator == width:
            return lines
    return 10


def cvt_modeline(width: int, height: int, refresh: float = REFRESH_HZ) -> ModeLine:
    """A CVT modeline for exactly `width`x`height` (CVT computes the blanking on the width rounded up to its
    8-pixel cell; the active area stays the asked size, which RandR accepts)."""
    cells = -(-width // _H_GRANULARITY) * _H_GRANULARITY
    vsync = _vsync_lines(cells, height)
    h_period_us = (1_000_000.0 / refresh - _MIN_VSYNC_BP_US) / (height + _MIN_V_PORCH)
    vsync_and_back_porch = max(int(_MIN_VSYNC_BP_US / h_period_us) + 1, vsync + _MIN_V_BACK_PORCH)
    v_total = height + vsync_and_back_porch + _MIN_V_PORCH
    blank_percent = max(20.0, _C_PRIME - _M_PRIME * h_period_us / 1000.0)
    h_blank = int(cells * blank_percent / (100.0 - blank_percent))
    h_blank -= h_blank % (2 * _H_GRANULARITY)
    h_total = cells + h_blank
    h_sync_end = cells + h_blank // 2
    h_sync_width = h_total * _HSYNC_PERCENT // 100
    h_sync_width -= h_sync_width % _H_GRANULARITY
    clock = int(h_total * 1000.0 / h_period_us)
    clock -= clock % _CLOCK_STEP_KHZ
    v_sync_start = height + _MIN_V_PORCH
    return ModeLine(width, height, clock, h_sync_end - h_sync_width, h_sync_end, h_total,
                    v_sync_start, v_sync_start + vsync, v_total)


def millimetres(pixels: int, dpi: int) -> int:
    """The physical size RandR reports for `pixels` at `dpi` (what apps derive their dpi from)."""
    return max(1, round(pixels * MM_PER_INCH / dpi))


def read_geometry(display: Display) -> ScreenGeometry:
    """The screen's size now and the largest RandR allows (asked of the server: python-xlib's `screen()` keeps
    the size the connection was opened with)."""
    root = display.screen().root
    limits = root.xrandr_get_screen_size_range()
    now = root.get_geometry()
    return ScreenGeometry(int(now.width), int(now.height), int(limits.max_width), int(limits.max_height))


def _named_modes(resources: object) -> dict[str, int]:
    """The server's modes by name."""
    names: str = resources.mode_names  # type: ignore[attr-defined]
    found: dict[str, int] = {}
    offset = 0
    for mode in resources.modes:  # type: ignore[attr-defined]
        found[names[offset:offset + mode.name_length]] = int(mode.id)
        offset += mode.name_length
    return found


def _forget_modes(display: Display, output: int, modes: dict[str, int], keep: int) -> None:
    """Remove the modes earlier switches made, but the one in use: a person fitting the screen to a browser
    window again and again would otherwise grow the server's mode list (and every client's copy) without end."""
    for name, mode in modes.items():
        if name.endswith(MODE_SUFFIX) and mode != keep:
            display.xrandr_delete_output_mode(output, mode)
            display.xrandr_destroy_mode(mode)


def check_fits(width: int, height: int, geometry: ScreenGeometry) -> None:
    """Refuse a size beyond the framebuffer: a 400 naming `width` and/or `height`, with the maximum."""
    errors = []
    for field, value, limit in (("width", width, geometry.max_width), ("height", height, geometry.max_height)):
        if value > limit:
            errors += field_errors(field, f"{field} {value} exceeds this desktop's maximum {field} {limit}")
    if errors:
        raise InvalidAction(
            f"{width}x{height} is larger than this desktop's maximum screen "
            f"{geometry.max_width}x{geometry.max_height}; "
            "start the desktop with a larger maxWidth/maxHeight to go beyond it (docs/display.md)",
            errors=errors, maxWidth=geometry.max_width, maxHeight=geometry.max_height)


def set_screen_size(display: Display, width: int, height: int, dpi: int) -> ScreenGeometry:
    """Switch the screen to `width`x`height` at `dpi`; returns once the server applied it.

    The one output's CRTC shows the new mode and the screen takes its size; growing sets the screen size
    first (a CRTC may not reach past the screen) and shrinking last. The CRTC is left as it is when the
    size does not change, so a dpi-only change touches the physical size alone.
    """
    current = read_geometry(display)
    check_fits(width, height, current)
    root = display.screen().root
    resources = root.xrandr_get_screen_resources()
    stamp = resources.config_timestamp
    crtc, output = _crtc_and_output(display, resources)
    mm = (millimetres(width, dpi), millimetres(height, dpi))
    if (width, height) == (current.width, current.height):
        root.xrandr_set_screen_size(width, height, *mm)
        display.sync()
        return read_geometry(display)
    line = cvt_modeline(width, height)
    modes = _named_modes(resources)
    mode = modes.get(line.name)
    if mode is None:
        info = {"id": 0, "width": line.width, "height": line.height, "dot_clock": line.dot_clock_khz * 1000,
                "h_sync_start": line.h_sync_start, "h_sync_end": line.h_sync_end, "h_total": line.h_total,
                "h_skew": 0, "v_sync_start": line.v_sync_start, "v_sync_end": line.v_sync_end,
                "v_total": line.v_total, "name_length": len(line.name),
                "flags": _RR_HSYNC_NEGATIVE | _RR_VSYNC_POSITIVE}
        mode = int(root.xrandr_create_mode(info, line.name).mode)
        display.xrandr_add_output_mode(output, mode)
    grows = width > current.width or height > current.height
    if grows:
        root.xrandr_set_screen_size(max(width, current.width), max(height, current.height), *mm)
    reply = display.xrandr_set_crtc_config(crtc, stamp, 0, 0, mode, randr.Rotate_0, [output])
    if reply.status != randr.SetConfigSuccess:
        raise DesktopFailed(f"the X server refused the {line.name} mode (RandR status {reply.status})")
    root.xrandr_set_screen_size(width, height, *mm)
    _forget_modes(display, output, modes, keep=mode)
    display.sync()
    applied = read_geometry(display)
    # Requests without a reply report their errors to python-xlib's default handler, not to us: check the result.
    if (applied.width, applied.height) != (width, height):
        raise DesktopFailed(f"the X server kept its {applied.width}x{applied.height} screen instead of {line.name}")
    return applied


def _crtc_and_output(display: Display, resources: object) -> tuple[int, int]:
    """The connected output and the CRTC driving it (Xvfb: `screen`; Xorg's dummy: `DUMMY0`)."""
    stamp = resources.config_timestamp  # type: ignore[attr-defined]
    for output in resources.outputs:  # type: ignore[attr-defined]
        info = display.xrandr_get_output_info(output, stamp)
        if info.connection != randr.Connected:
            continue
        crtc = info.crtc or (info.crtcs[0] if info.crtcs else X.NONE)
        if crtc != X.NONE:
            return int(crtc), int(output)
    raise DesktopFailed("the X server has no connected RandR output to resize")


def set_resource_dpi(display: Display, dpi: int) -> None:
    """Write `Xft.dpi` into the root window's RESOURCE_MANAGER (what `xrdb -merge` does): GTK, Qt and
    Chromium started afterwards read their font scaling from it."""
    root = display.screen().root
    atom = display.intern_atom("RESOURCE_MANAGER")
    current = root.get_full_property(atom, X.AnyPropertyType)
    text = current.value.decode("latin-1") if current is not None and isinstance(current.value, bytes) else ""
    lines = [line for line in text.splitlines() if line and not line.startswith("Xft.dpi:")]
    lines.append(f"Xft.dpi:\t{dpi}")
    root.change_property(atom, Xatom.STRING, 8, ("\n".join(lines) + "\n").encode())
    display.sync()


def apply_display(display: Display, width: int, height: int, dpi: int) -> ScreenGeometry:
    """The whole change, as one job on the X thread: size, physical size and Xft.dpi."""
    geometry = set_screen_size(display, width, height, dpi)
    set_resource_dpi(display, dpi)
    return geometry
