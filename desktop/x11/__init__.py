"""The X connection layer: the thread that owns a connection (thread.py), requests packed below python-xlib
(raw.py), python-xlib waiting with poll() (xlib_poll.py), one reconnect policy (reconnect.py), selections and
XDND, RandR, and `Session`, the running desktop as actions see it. Imports only desktop/core."""
