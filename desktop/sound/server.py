"""The desktop's sound server: one PulseAudio per desktop with a null sink that apps play into (docs/audio.md).

PulseAudio runs as a supervised child of the desktop (desktop/lifecycle/supervisor.py) with no configuration file
(`-n`): the modules below are all it loads. Apps reach it through `PULSE_SERVER`, which every desktop
process gets; the live view and recordings read the sink's monitor (desktop/sound/capture.py).
Without the `pulseaudio` binary the desktop runs without sound and says so in its runtime log.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from desktop.core.dependencies import which
from desktop.core.errors import DesktopError
from sandbox_desktop_wire.problems import ProblemCode

PULSEAUDIO = "pulseaudio"
SAMPLE_RATE = 48_000
CHANNELS = 2
SAMPLE_BYTES = 2
"""s16le: what the null sink mixes in and what the capture reads (no resampling anywhere)."""
CHUNK_MS = 40
"""40 ms, not WebRTC's usual 20: half the pipe reads, encodes and packets, so a tone costs 3.3 % of a core
instead of 6.0 % (bench/audio.py); the sound reaches a viewer ~15 ms later, far within its 150 ms budget."""
CHUNK_SAMPLES = SAMPLE_RATE * CHUNK_MS // 1000
CHUNK_BYTES = CHUNK_SAMPLES * CHANNELS * SAMPLE_BYTES
"""One chunk: what the capture reads at a time and what an Opus packet carries."""
SINK_NAME = "desktop_sink"
"""The one sink of every desktop's server (each desktop has its own server, so the name need not differ)."""
SOCKET_NAME = "pulse.sock"
READY_TIMEOUT_S = 5.0


class AudioUnavailable(DesktopError):
    """`audio: true` (a recording, a viewer) on a desktop that has no sound server."""

    code = ProblemCode.AUDIO_UNAVAILABLE


class SoundState(StrEnum):
    """Whether the desktop has sound, for its log and status."""

    RUNNING = "running"
    MISSING = "missing"
    """`pulseaudio` is not installed: the desktop runs without sound."""
    FAILED = "failed"
    """It is installed but did not start (its log says why)."""


@dataclass(frozen=True)
class SoundServer:
    """Where one desktop's PulseAudio listens and what it plays into."""

    runtime_dir: Path
    """The desktop's private `XDG_RUNTIME_DIR` (short: a socket path must fit in 108 bytes)."""
    sink: str = SINK_NAME

    @property
    def socket(self) -> Path:
        return self.runtime_dir / SOCKET_NAME

    @property
    def monitor(self) -> str:
        """The source that carries everything played into the sink."""
        return f"{self.sink}.monitor"

    def environment(self) -> dict[str, str]:
        """What every desktop process gets so that libpulse (and ALSA's pulse plugin) finds this server."""
        return {"PULSE_SERVER": f"unix:{self.socket}"}

    def arguments(self) -> list[str]:
        """pulseaudio's command line: no config file, no idle exit, no realtime scheduling, and exactly the
        modules a null sink needs (measured: 8-12 MiB, ~0 % CPU when idle)."""
        return [
            "--daemonize=no", "--system=false", "-n", "--exit-idle-time=-1", "--realtime=false",
            "--high-priority=false", "--use-pid-file=false", "--log-target=stderr",
            # norewinds: a rewind (a new stream, a latency change) rewrites audio the monitor has already
            # handed out, and its reader then skips or repeats samples (a tone came out 2.5 % sharp).
            "-L", f"module-null-sink sink_name={self.sink} rate={SAMPLE_RATE} channels={CHANNELS} format=s16le "
                  f"norewinds=1 sink_properties=device.description=desktop",
            # Anonymous: the socket sits in a 0700 directory of the desktop, which is the access control.
            "-L", f"module-native-protocol-unix socket={self.socket} auth-anonymous=1",
            "-L", "module-always-sink",
        ]


def find_pulseaudio() -> str | None:
    """The pulseaudio binary on PATH, or None (the desktop then has no sound)."""
    return which(PULSEAUDIO)
