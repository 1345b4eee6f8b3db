"""The numeric limits of the wire: one name per limit, used by the models' `Field(ge=..., le=...)` (so the
OpenAPI document states them as `minimum`/`maximum`) and by the server's own checks of the same values
(desktop/, api/), which import them from here rather than repeat the number.

A value out of these ranges is a 400 naming the field (`desktop_invalid_action` on desktop routes,
`invalid_request` elsewhere), whether the model or the server refuses it (docs/errors.md "Bad input").
"""

from __future__ import annotations

# -- a desktop's start request (docs/desktop.md) ----------------------------------------------------
MIN_DIMENSION = 64
MAX_DIMENSION = 8192
"""Screen width and height; Xvfb refuses screens beyond its framebuffer limit, 8K is past any agent's needs."""
MIN_DPI, MAX_DPI = 1, 1000
MIN_DISPLAY_NUM, MAX_DISPLAY_NUM = 1, 64_999
MIN_FPS, MAX_FPS = 1, 60
"""`streamFrameRate`, `recordingFps` and a recording's `fps`."""
MIN_PORT, MAX_PORT = 1024, 65_535
"""Either end of `webrtcPortRange` (a `LOW-HIGH` string, checked by the server)."""

# -- many desktops and their tokens (docs/desktops.md) ---------------------------------------------
MAX_TTL_SECONDS = 30 * 24 * 3600
"""`ttlSeconds` and `idleTimeoutSeconds` of a desktop, `ttlSeconds` of a scoped token."""
MAX_TAGS = 32
MAX_TAG_LENGTH = 256

# -- mouse and keyboard (docs/mouse.md, docs/keyboard.md) ------------------------------------------
MAX_CLICKS = 3
MAX_DRAG_STEPS = 1000
MAX_DRAG_MS = 60_000
MAX_WHEEL_CLICKS = 100
"""Either delta of a scroll, in wheel clicks."""
MAX_TYPE_CHARS = 100_000
"""Characters one typing request may carry; more is a 413 (the server checks it, not the model)."""
MAX_TYPE_DELAY_MS = 60_000

# -- screenshots (docs/screenshots.md) -------------------------------------------------------------
MIN_QUALITY, MAX_QUALITY = 1, 100
MIN_SCALE, MAX_SCALE = 0.1, 1.0

# -- windows and apps (docs/windows.md, docs/apps.md) ----------------------------------------------
MAX_WINDOW_COORDINATE = 32_767
"""X protocol geometry is 16-bit: a window's x and y within +-this, its width and height up to it."""
MAX_LAUNCH_WAIT_MS = 60_000

# -- a batch of actions (docs/actions.md) ----------------------------------------------------------
MAX_ACTIONS = 1000
MAX_ACTION_MS = 60_000
"""Any duration or wait inside a batch."""
MAX_IMAGE_SIZE = 16_384
MAX_DRAG_POINTS = 1000
MAX_MODIFIERS = 8
MAX_ACTION_LOG_ENTRIES = 10_000

# -- processes (docs/processes.md) -----------------------------------------------------------------
MAX_PROCESS_WAIT_MS = 300_000
"""`waitMs` of stop and kill."""
MAX_TERMINAL_SIZE = 65_535
"""Columns and rows of a terminal."""

# -- events and waits (docs/events.md) -------------------------------------------------------------
MAX_WAIT_MS = 300_000
"""`timeoutMs` of `POST /v1/desktop/wait` (a batch's `wait` action is bounded by MAX_ACTION_MS instead)."""
DEFAULT_WAIT_MS = 10_000
MIN_QUIET_MS, MAX_QUIET_MS = 10, 60_000
"""`quietMs` of a screen condition: how long nothing may be drawn for the screen to count as settled."""
MAX_PATTERN_LENGTH = 1000
"""`title`, `titleRegex` and `class` of a window condition."""

# -- accessibility (docs/accessibility.md) ---------------------------------------------------------
MAX_TREE_DEPTH = 256
MAX_ELEMENTS = 1000
"""Elements one `find` answers."""
MAX_ELEMENT_TEXT = 1000
"""A name, a substring or a pattern in an element query."""
