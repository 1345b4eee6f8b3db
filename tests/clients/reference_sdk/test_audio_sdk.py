"""The reference SDK's React `DesktopViewer` with the desktop's sound (docs/audio.md), in Chromium.

The viewer sets the stream of `ontrack` as its `<video>`'s `srcObject` and renders the element muted: the
server puts the Opus track in the video's MediaStream, so that element holds the sound, and a host app that
unmutes it plays it. Checked with WebAudio on the element's stream while a tone plays inside the desktop.
The page, its server and the browser are tests/clients/reference_sdk/test_sdk_viewer.py's fixtures.
"""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path

import pytest

from tests.clients.reference_sdk import test_sdk_viewer as sdk
from tests.clients.reference_sdk.test_sdk_viewer import Viewers, connect
from tests.support.sound import TONE_HZ, desktop_env, hear_tone

# tests/clients/reference_sdk/test_sdk_viewer.py's page, server and browser, bound here so pytest finds them in
# this module.
network, browser, bundle, page_origin, srv, forwarder, viewers = (
    sdk.network, sdk.browser, sdk.bundle, sdk.page_origin, sdk.srv, sdk.forwarder, sdk.viewers)

pytestmark = [*sdk.pytestmark, pytest.mark.skipif(shutil.which("paplay") is None or shutil.which("pulseaudio") is None,
                                             reason="pulseaudio and pulseaudio-utils are not installed")]

def test_the_react_viewers_video_carries_the_sound(viewers: Viewers, tmp_path: Path) -> None:
    page = viewers.open()
    connect(page)
    page.wait_for("document.querySelector('video').srcObject?.getAudioTracks().length === 1",
                  "the audio track in the viewer's stream", 10)
    assert page.evaluate("document.querySelector('video').srcObject.getVideoTracks().length") == 1
    assert page.evaluate("document.querySelector('video').muted") is True, "the reference renders it muted"
    page.evaluate("document.querySelector('video').muted = false")  # what a host app does on a click
    try:
        peaks = hear_tone(page, "document.querySelector('video')", desktop_env(viewers.api), tmp_path,
                          "the tone in the React viewer")
    finally:
        viewers.close()
    heard = statistics.median_high(peaks)
    print(f"\nDesktopViewer heard {heard:.1f} Hz")
    assert heard == pytest.approx(TONE_HZ, abs=5)  # an AnalyserNode bin is 23 Hz: its interpolated peak wanders
