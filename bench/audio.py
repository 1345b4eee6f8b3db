"""The desktop's sound (docs/audio.md): what it costs while a tone plays and while silent, how late it reaches a
viewer, and how far sound and picture drift apart in a recording.

    .venv/bin/python bench/audio.py [--seconds 5] [--trials 5]

CPU is read from /proc for the server, its PulseAudio and the capture's `parec` and `pactl subscribe`
(what the player itself costs is printed apart: it is the app's, not ours). "silent" is a viewer connected
to a desktop where nothing plays; "tone" the same viewer while `paplay` plays a 440 Hz sine; "zeros" a player
that is open but plays digital silence (`pacat /dev/zero`: the sink runs, nothing is encoded or sent); the baseline in
the same run is the server with that viewer on a silent desktop. Latency: a tone written into an already
connected `pacat --latency-msec=20` (its own buffer included) until the first loud frame decoded by an
aiortc viewer in this process, and until its RTP packet arrived (before aiortc's 4-packet audio jitter
buffer, which a browser sizes adaptively). A/V offset: the recording test's script (the screen turns
white and a tone starts at the same moment, inside the desktop) decoded from each recording.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import math
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import av
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from aiortc.rtcrtpreceiver import RTCRtpReceiver

from bench.common import cpu_seconds
from tests.api.sound.test_audio import AV_SCRIPT, AudioViewer, channel, first_white, loud_span
from tests.conftest import ServerProcess, launch_server
from tests.support.pids import host_pid
from tests.support.sound import desktop_env, write_tone

DISPLAY_NUM = 296
SIZE = (1024, 768)
F_SETPIPE_SZ = 1031
LOUD = 0.05

ARRIVALS: list[tuple[float, int]] = []
"""(monotonic arrival, payload bytes) of this process's audio packets; digital silence is 3 bytes a packet."""
SOUND_PACKET = 20
"""Payload bytes above which an Opus packet carries sound, not silence."""


def _record_arrivals() -> None:
    original = RTCRtpReceiver._handle_rtp_packet

    async def handle(receiver: RTCRtpReceiver, packet: Any, arrival_time_ms: int) -> None:
        if receiver.track is not None and receiver.track.kind == "audio":
            ARRIVALS.append((time.monotonic(), len(packet.payload)))
        await original(receiver, packet, arrival_time_ms)

    RTCRtpReceiver._handle_rtp_packet = handle  # type: ignore[method-assign]


def children(pid: int, names: tuple[str, ...]) -> list[int]:
    """Child processes of `pid` running one of `names`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            if comm in names and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


def pulse_pid(api: httpx.Client) -> int:
    return int(next(host_pid(p) for p in api.get("/v1/processes").json()["processes"]
                    if p["status"] == "running" and p["command"].endswith("pulseaudio")))


def cpu_percent(pids: dict[str, list[int]], seconds: float) -> dict[str, float]:
    """% of one core used by each group of processes over `seconds` (processes that end count until then)."""
    def sample() -> dict[str, float]:
        total = {}
        for name, group in pids.items():
            used = 0.0
            for pid in group:
                with suppress(OSError):  # it ended meanwhile
                    used += cpu_seconds(pid)
            total[name] = used
        return total

    before, start = sample(), time.monotonic()
    time.sleep(seconds)
    after, elapsed = sample(), time.monotonic() - start
    return {name: 100 * (after[name] - before[name]) / elapsed for name in pids}


@contextmanager
def desktop() -> Iterator[tuple[ServerProcess, httpx.Client, dict[str, str]]]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-audio-"))
    server = launch_server(tmp)
    api = server.client()
    try:
        started = api.post("/v1/desktop/start", json={"displayNum": DISPLAY_NUM, "width": SIZE[0],
                                                      "height": SIZE[1], "streamVideoCodec": "vp8"})
        if started.status_code != 200:
            raise SystemExit(f"desktop start failed: {started.text}")
        assert api.post("/v1/desktop/stream/start").status_code == 200
        yield server, api, desktop_env(api)
    finally:
        api.post("/v1/desktop/stop")
        api.close()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def show(name: str, figures: dict[str, float], baseline: float | None = None) -> None:
    parts = "   ".join(f"{k} {v:5.2f} %" for k, v in figures.items())
    extra = f"   (server {figures['server'] / baseline:.2f}x silent)" if baseline else ""
    print(f"{name:<34} {parts}{extra}")


async def cpu_with_viewer(server: ServerProcess, api: httpx.Client, env: dict[str, str], seconds: float,
                          tmp: Path) -> None:
    viewer = AudioViewer(server.url, server.token)
    await viewer.connect()
    try:
        await asyncio.sleep(1.0)
        loop = asyncio.get_running_loop()
        groups = {"server": [server.proc.pid], "pulseaudio": [pulse_pid(api)],
                  "capture": children(server.proc.pid, ("parec", "pactl"))}
        silent = await loop.run_in_executor(None, cpu_percent, groups, seconds)
        silent["audio"] = silent["pulseaudio"] + silent["capture"]
        show("viewer, silent desktop", silent)

        async def while_playing(player: subprocess.Popen[bytes]) -> dict[str, float]:
            """CPU while `player` plays (from a second after it started; it is ended after), with `audio`: what the
            sound costs beyond the silent desktop's server."""
            try:
                await asyncio.sleep(1.0)
                groups["capture"] = children(server.proc.pid, ("parec", "pactl"))
                groups["player (the app's)"] = [player.pid]
                figures = await loop.run_in_executor(None, cpu_percent, groups, seconds)
            finally:
                player.kill()
                player.wait()
            figures["audio"] = (figures["pulseaudio"] + figures["capture"]
                                + max(0.0, figures["server"] - silent["server"]))
            return figures

        frames_before = len(viewer.audio)
        tone = await while_playing(subprocess.Popen(["paplay", str(write_tone(tmp / "long.wav", seconds + 3))],
                                                    env=env))
        show("viewer, tone playing", tone, silent["server"])
        print(f"{'':<34} audio frames received: silent 0 expected, got {frames_before}; "
              f"tone {len(viewer.audio) - frames_before}")
        quiet = await while_playing(subprocess.Popen(["pacat", "--playback", "--raw", "--format=s16le",
                                                      "--rate=48000", "--channels=2", "/dev/zero"], env=env))
        show("viewer, a player playing zeros", quiet, silent["server"])
        print(f"{'sound cost (target <= 5 % / 0.5 %)':<34} tone {tone['audio']:.2f} % of a core, "
              f"silent {silent['audio']:.2f} %, open but quiet player {quiet['audio']:.2f} %")
    finally:
        await viewer.close()


async def latency(server: ServerProcess, env: dict[str, str], trials: int) -> None:
    viewer = AudioViewer(server.url, server.token)
    await viewer.connect()
    cat = subprocess.Popen(["pacat", "--playback", "--raw", "--latency-msec=20", "--format=s16le", "--rate=48000",
                            "--channels=2"], stdin=subprocess.PIPE, env=env)
    assert cat.stdin is not None
    fcntl.fcntl(cat.stdin.fileno(), F_SETPIPE_SZ, 4096)  # else the pipe holds 0.34 s of sound back
    tone = b"".join(struct.pack("<hh", v, v) for v in (int(12000 * math.sin(2 * math.pi * 440 * i / 48000))
                                                        for i in range(9600)))
    decoded, arrived = [], []
    loop = asyncio.get_running_loop()
    try:
        for _ in range(trials):
            await loop.run_in_executor(None, cat.stdin.write, bytes(48000 * 4 // 2))  # 0.5 s of silence
            await loop.run_in_executor(None, cat.stdin.flush)
            seen = len(viewer.audio)
            written = time.monotonic()
            await loop.run_in_executor(None, cat.stdin.write, tone)
            await loop.run_in_executor(None, cat.stdin.flush)
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                loud = next(((at, f) for at, f in viewer.audio[seen:] if max(map(abs, channel(f))) > LOUD), None)
                if loud is not None:
                    decoded.append(loud[0] - written)
                    arrival = next((at for at, size in ARRIVALS if at > written and size > SOUND_PACKET), None)
                    if arrival is not None:
                        arrived.append(arrival - written)
                    break
                await asyncio.sleep(0.005)
    finally:
        cat.stdin.close()
        cat.kill()
        cat.wait()
        await viewer.close()
    if decoded:
        print(f"{'latency to decoded (aiortc viewer)':<34} median {statistics.median(decoded) * 1000:6.1f} ms   "
              f"max {max(decoded) * 1000:6.1f} ms   n={len(decoded)}")
    if arrived:
        print(f"{'latency to RTP arrival':<34} median {statistics.median(arrived) * 1000:6.1f} ms   "
              f"max {max(arrived) * 1000:6.1f} ms   n={len(arrived)}   (target <= 150 ms)")


def av_offsets(api: httpx.Client, tmp: Path, trials: int) -> None:
    script = tmp / "av_script.py"
    script.write_text(AV_SCRIPT)
    offsets = []
    for k in range(trials):
        assert api.post("/v1/desktop/recording/start", json={"audio": True}).status_code == 200
        api.post("/v1/processes/run", json={"command": sys.executable, "args": [str(script)], "timeoutMs": 20000})
        time.sleep(0.3)
        record = api.post("/v1/desktop/recording/stop").json()
        path = tmp / f"av{k}.mp4"
        path.write_bytes(api.get(f"/v1/desktop/recordings/{record['id']}/download").content)
        with av.open(str(path)) as container:
            frames = list(container.decode(audio=0))
        samples = [v for f in frames for v in channel(f)]
        onset = float(frames[0].pts * frames[0].time_base) + loud_span(samples)[0] / 48000
        with av.open(str(path)) as container:
            white = first_white(container.decode(video=0))
        offsets.append(onset - white)
    print(f"{'recording A/V offset (sound later)':<34} " + "  ".join(f"{o * 1000:+.0f} ms" for o in offsets)
          + f"   max |{max(abs(o) for o in offsets) * 1000:.0f}| ms   (target <= 80 ms)")


def recording_cost(server: ServerProcess, api: httpx.Client, seconds: float) -> None:
    for audio in (False, True):
        api.post("/v1/desktop/recording/start", json={"audio": audio})
        time.sleep(1.0)
        used = cpu_percent({"server": [server.proc.pid],
                            "capture": children(server.proc.pid, ("parec", "pactl"))}, seconds)
        api.post("/v1/desktop/recording/stop")
        show(f"recording, silent, audio {str(audio).lower()}", used)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    _record_arrivals()
    tmp = Path(tempfile.mkdtemp(prefix="bench-audio-files-"))
    try:
        with desktop() as (server, api, env):
            print(f"display {SIZE[0]}x{SIZE[1]}, {os.cpu_count()} cores, % of one core over {args.seconds:.0f} s\n")
            asyncio.run(cpu_with_viewer(server, api, env, args.seconds, tmp))
            recording_cost(server, api, args.seconds)
            asyncio.run(latency(server, env, args.trials))
            av_offsets(api, tmp, min(args.trials, 3))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
