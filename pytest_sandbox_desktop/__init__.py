"""A pytest plugin for GUI tests on sandbox-desktop (docs/pytest.md), registered by the `sandbox-desktop`
distribution's `pytest11` entry point: installing the distribution is all it takes.

    def test_name_dialog(desktop):                      # a desktop of this test's own
        desktop.launch("zenity", ["--entry", "--title=Name", "--text=Your name"], wait=True)
        desktop.expect_window(title="Name")
        desktop.act({"role": "textbox"}, "setValue", value="Ada")
        desktop.act({"role": "button", "name": "OK"}, "click")
        desktop.expect_window(title="Name", until="gone")

Fixtures: `desktop_server` (session: the server), `desktop` (per test: a `Desktop`, the client's
`DesktopClient` with waiting assertions). On failure the test's screenshot, recording, action log and
accessibility tree go to `desktop-artifacts/<test>/`.

The names below are imported on first use (PEP 562): pytest imports the plugin in every session, and a
session that asks for no desktop should not pay for loading the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sandbox_desktop_client._lazy import lazy_exports

from .options import Isolation, RecordMode, ServerMode

if TYPE_CHECKING:
    from .artifacts import ArtifactKind
    from .handle import Desktop
    from .pool import ResetFailedWarning
    from .server import DesktopServer

_EXPORTS = {"ArtifactKind": ".artifacts", "Desktop": ".handle", "DesktopServer": ".server",
            "ResetFailedWarning": ".pool"}

__all__ = ["ArtifactKind", "Desktop", "DesktopServer", "Isolation", "RecordMode", "ResetFailedWarning",
           "ServerMode"]


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())
