"""Sound for tests (docs/audio.md): tones played inside a desktop with its own environment (`PULSE_SERVER`), and
a page's WebAudio analyser that hears them in a live view's `<video>`."""

from __future__ import annotations

import array
import math
import subprocess
import wave
from pathlib import Path
from typing import Any

import httpx

from tests.support.browser import Page

TONE_HZ = 440.0
RATE = 48_000

_ANALYSE = """(async () => {
  const video = VIDEO;
  const context = new AudioContext({sampleRate: 48000});
  await context.resume();
  const source = context.createMediaStreamSource(video.srcObject);
  const analyser = context.createAnalyser();
  analyser.fftSize = 32768;
  analyser.smoothingTimeConstant = 0;
  source.connect(analyser);
  window.audioProbe = {context, analyser, peaks: []};
  const bins = new Float32Array(analyser.frequencyBinCount);
  const sample = () => {
    analyser.getFloatFrequencyData(bins);
    let best = 1;
    for (let i = 2; i < bins.length - 1; i++) if (bins[i] > bins[best]) best = i;
    // Parabolic interpolation of the peak between its neighbours (dB values).
    const [a, b, c] = [bins[best - 1], bins[best], bins[best + 1]];
    const shift = (a - c) / (2 * (a - 2 * b + c)) || 0;
    window.audioProbe.peaks.push({hz: (best + shift) * context.sampleRate / analyser.fftSize, db: b});
  };
  window.audioProbe.timer = setInterval(sample, 100);
  return context.state;
})()"""
"""Starts `window.audioProbe`: the strongest frequency of VIDEO's sound (a JS expression for the element) and its
level, ten times a second."""


def write_tone(path: Path, seconds: float, hz: float = TONE_HZ) -> Path:
    """A stereo s16 WAV of a sine at `hz`."""
    samples = array.array("h")
    for i in range(int(RATE * seconds)):
        value = int(12000 * math.sin(2 * math.pi * hz * i / RATE))
        samples.extend((value, value))
    with wave.open(str(path), "wb") as out:
        out.setnchannels(2)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes(samples.tobytes())
    return path


def desktop_env(api: httpx.Client) -> dict[str, str]:
    """The environment of the desktop's processes (what `paplay` needs to reach its sound server)."""
    run = api.post("/v1/processes/run", json={"command": "env", "args": ["-0"]})
    assert run.status_code == 200, run.text
    return dict(item.split("=", 1) for item in run.json()["stdout"].split("\0") if "=" in item)


def play(env: dict[str, str], wav: Path) -> subprocess.Popen[bytes]:
    """`paplay wav` inside the desktop whose environment `env` is."""
    return subprocess.Popen(["paplay", str(wav)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def hear_tone(page: Page, video: str, env: dict[str, str], folder: Path, what: str) -> list[float]:
    """Play a 4 s tone (TONE_HZ) inside the desktop of `env` while the page analyses the sound of its `video`
    element (a JS expression); the frequencies of the loud peaks it heard (at least five). The player and the
    analyser are stopped after, whatever happened."""
    assert page.evaluate(_ANALYSE.replace("VIDEO", video), timeout=15) == "running"
    player = play(env, write_tone(folder / "tone.wav", 4.0))
    try:
        peaks: list[dict[str, Any]] = page.wait_for(
            "(() => { const p = window.audioProbe.peaks.filter(x => x.db > -60); return p.length >= 5 ? p : null; })()",
            what, 15)
    finally:
        player.kill()
        player.wait()
        page.evaluate("clearInterval(window.audioProbe.timer); window.audioProbe.context.close()")
    return [float(p["hz"]) for p in peaks]
