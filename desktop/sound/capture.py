"""One reader of the desktop's sound, shared by every listener (live viewers, the recording); docs/audio.md.

A long-lived `parec --latency-msec=40` on the null sink's monitor gets 40 ms chunks (CHUNK_MS) 40-80 ms after
they played; a new `parec` would wait 1.3-1.5 s for its first chunk (the idle null sink renders in
2 s blocks), so one reader runs while anyone listens and fans its chunks out. Each listener has a
short queue: a slow one loses its oldest chunks, nobody waits for it. The reader outlives its last listener
by LINGER_S: a recording stopped and the next one started at once (a test harness between two tests) keeps
it, instead of starting `pactl` and `parec` six times again (~50 ms of CPU, bench/pytest_plugin.py).

Silence costs nothing: while no app plays (no sink input, watched through `pactl subscribe`), the
sink is suspended, so PulseAudio, `parec` and this module all sleep (measured: 2.4 % of a core
reading digital silence, 0.0 % suspended). A player that connects to a suspended sink waits in its
buffer until the sink resumes ~15 ms later: nothing is lost, the first chunk arrives ~50 ms after
the player started. Chunks of digital silence from an open but quiet player are dropped here:
listeners see a gap (a recording fills it with silence, a viewer gets no packets).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from desktop.core.dependencies import which
from desktop.sound.server import CHUNK_BYTES, CHUNK_MS, CHUNK_SAMPLES, SAMPLE_RATE, AudioUnavailable, SoundServer

logger = logging.getLogger("sandbox_desktop.audio")

QUEUE_CHUNKS = 500 // CHUNK_MS
"""Chunks a listener may fall behind (0.5 s) before its oldest are dropped."""
CAPTURE_DELAY_S = 0.02
"""How long after it played a chunk's last sample reaches us (measured: bench/audio.py)."""
RESYNC_S = 0.5
"""Chunks this far off the clock (samples were lost: the pipe overflowed) are stamped from the clock again.
Lateness alone is not a gap: a busy event loop reads a backlog of chunks late, all of which played in turn."""
RETRY_S = 0.5
"""Wait between attempts while the sound server is down (restarting) and someone still listens."""
RELIST_PAUSES_S = (0.1, 0.3, 0.6, 1.0)
"""Pauses before the players are listed again after a capture starts (`_list_again`): by 2 s the
subscription reporting them is live however loaded the machine is."""
LINGER_S = 5.0
"""How long the reader runs on after its last listener left (suspended while nothing plays: no cost)."""
_SILENT_CHUNK = bytes(CHUNK_BYTES)
SINK_INPUT_EVENT = re.compile(r"Event '(new|remove)' on sink-input #(\d+)")


class CaptureState(StrEnum):
    IDLE = "idle"
    """Nobody listens: no reader runs."""
    SUSPENDED = "suspended"
    """Someone listens but no app plays: the sink is suspended, nothing runs."""
    CAPTURING = "capturing"


@dataclass(frozen=True)
class AudioChunk:
    """CHUNK_MS of interleaved s16le stereo at 48 kHz."""

    data: bytes
    at: float
    """Monotonic time at which its first sample played."""
    sample: int
    """Its first sample's index on the capture's clock (sample 0 played at `AudioCapture.epoch`): what
    timestamps audio frames, with the gaps of suspended silence kept."""


class AudioSubscription:
    """One listener's queue of chunks."""

    def __init__(self, capture: AudioCapture) -> None:
        self._capture = capture
        self._chunks: deque[AudioChunk] = deque(maxlen=QUEUE_CHUNKS)
        self._ready = asyncio.Event()
        self.dropped = 0
        self.closed = False

    def push(self, chunk: AudioChunk) -> None:
        if len(self._chunks) == QUEUE_CHUNKS:
            self.dropped += 1  # the deque drops the oldest
        self._chunks.append(chunk)
        self._ready.set()

    async def next(self, timeout: float | None = None) -> AudioChunk | None:
        """The next chunk; None after `timeout` seconds of silence or once closed."""
        while not self._chunks:
            if self.closed:
                return None
            self._ready.clear()
            try:
                await asyncio.wait_for(self._ready.wait(), timeout)
            except TimeoutError:
                return None
        return self._chunks.popleft()

    def drain(self) -> list[AudioChunk]:
        """Every chunk queued now, without waiting."""
        chunks = list(self._chunks)
        self._chunks.clear()
        return chunks

    def end(self) -> None:
        """No more chunks will come (the capture closed): `next()` returns what is queued, then None."""
        self.closed = True
        self._ready.set()

    async def close(self) -> None:
        if not self.closed:
            self.end()
            await self._capture.unsubscribe(self)


class AudioCapture:
    """The desktop's sound for whoever listens; `locate()` gives the running sound server and its env."""

    def __init__(self, locate: Callable[[], tuple[SoundServer, dict[str, str]] | None], *,
                 linger_s: float = LINGER_S) -> None:
        self._locate = locate
        self._linger_s = linger_s
        self._linger: asyncio.TimerHandle | None = None
        """Stops the reader LINGER_S after its last listener left, unless another came meanwhile."""
        self.epoch = time.monotonic()
        self.state = CaptureState.IDLE
        self.chunks = 0
        self.silent_chunks = 0
        """Chunks of digital silence read and dropped (a player open but quiet)."""
        self._subscribers: set[AudioSubscription] = set()
        self._resumed = True
        """The sink (re)started since the last chunk: the next one starts a new burst on the clock."""
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    @property
    def available(self) -> bool:
        """Whether the desktop has a running sound server (and `parec` to read it)."""
        return self._locate() is not None and which("parec") is not None and which("pactl") is not None

    def sample_at(self, at: float) -> int:
        """The capture clock's sample index at monotonic time `at`."""
        return round((at - self.epoch) * SAMPLE_RATE)

    async def subscribe(self) -> AudioSubscription:
        """Listen to the desktop (starting the reader for the first listener); 503 without a sound server."""
        if not self.available:
            raise AudioUnavailable("the desktop has no sound server: install pulseaudio and pulseaudio-utils "
                                   "(`sandbox-desktop install desktop`) and restart the desktop")
        async with self._lock:
            subscription = AudioSubscription(self)
            self._subscribers.add(subscription)
            if self._linger is not None:
                self._linger.cancel()
                self._linger = None
            if self._task is not None and self._task.cancelling():  # stopped after a linger, cleaning up:
                await asyncio.wait({self._task})  # its `finally` resumes the sink, which a new reader may suspend
            if self._task is None or self._task.done():
                self._task = asyncio.create_task(self._run(), name="audio-capture")
            return subscription

    async def unsubscribe(self, subscription: AudioSubscription) -> None:
        async with self._lock:
            self._subscribers.discard(subscription)
            if self._subscribers or self._task is None:
                return
            if self._linger_s > 0:
                if self._linger is None:
                    self._linger = asyncio.get_running_loop().call_later(self._linger_s, self._stop_unheard)
                return
            task, self._task = self._task, None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    def _stop_unheard(self) -> None:
        """LINGER_S after the last listener left with no other since: stop the reader (its own `finally`
        kills `parec` and `pactl subscribe` and resumes the sink)."""
        self._linger = None
        if not self._subscribers and self._task is not None:
            self._task.cancel()

    async def close(self) -> None:
        """Stop reading (the desktop stops); listeners see their subscription end."""
        for subscription in list(self._subscribers):
            subscription.end()
        self._subscribers.clear()
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _set_state(self, state: CaptureState) -> None:
        if state != self.state:
            logger.info("audio capture %s -> %s", self.state, state)
            self.state = state

    async def _run(self) -> None:
        try:
            while self._subscribers or self._linger is not None:
                found = self._locate()
                if found is not None:
                    try:
                        await self._capture(*found)
                    except Exception as exc:  # the listeners stay; the next attempt may work
                        logger.warning("audio capture failed: %s", exc)
                await asyncio.sleep(RETRY_S)  # the sound server went away: its supervisor restarts it
        finally:
            self._set_state(CaptureState.IDLE)

    async def _capture(self, server: SoundServer, env: dict[str, str]) -> None:
        """Read the monitor until the sound server ends, suspending the sink while nothing plays."""
        events = await asyncio.create_subprocess_exec(
            "pactl", "subscribe", env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        players = await self._players(env)
        await self._suspend(server, env, not players)  # before the reader starts: no chunk of idle silence
        reader = await asyncio.create_subprocess_exec(
            "parec", "--raw", f"--latency-msec={CHUNK_MS}", "--format=s16le", f"--rate={SAMPLE_RATE}",
            "--channels=2", f"--device={server.monitor}", "--client-name=sandbox-desktop-capture",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        watcher = asyncio.create_task(self._watch_players(server, env, events, players))
        relister = asyncio.create_task(self._list_again(server, env, players))
        try:
            await self._read(reader)
        finally:
            watcher.cancel()
            relister.cancel()
            for proc in (reader, events):
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await watcher
            with contextlib.suppress(OSError):  # leave the sink as we found it: running
                await _pactl(env, "suspend-sink", server.sink, "0")

    async def _players(self, env: dict[str, str]) -> set[int]:
        """The sink inputs (playing streams) now."""
        listing = await _pactl(env, "list", "short", "sink-inputs")
        return {int(line.split()[0]) for line in listing.splitlines() if line.split() and line.split()[0].isdigit()}

    async def _suspend(self, server: SoundServer, env: dict[str, str], suspend: bool) -> None:
        self._resumed = True  # the next chunk starts a new burst on the clock
        await _pactl(env, "suspend-sink", server.sink, "1" if suspend else "0")
        self._set_state(CaptureState.SUSPENDED if suspend else CaptureState.CAPTURING)

    async def _list_again(self, server: SoundServer, env: dict[str, str], players: set[int]) -> None:
        """The players listed again in the capture's first seconds. `pactl subscribe` reports only what
        happens once it has connected, a few milliseconds after it started (more on a loaded machine): a
        player that came in that gap was neither listed nor announced, and the sink stayed suspended under
        it, so a viewer heard nothing at all (seen once in CI)."""
        for pause in RELIST_PAUSES_S:
            await asyncio.sleep(pause)
            listed = await self._players(env)
            if listed != players:
                playing = bool(players)
                players.clear()
                players.update(listed)
                if bool(listed) != playing:
                    await self._suspend(server, env, not listed)

    async def _watch_players(self, server: SoundServer, env: dict[str, str],
                             events: asyncio.subprocess.Process, players: set[int]) -> None:
        """Keep the sink suspended exactly while it has no sink input (nothing plays)."""
        assert events.stdout is not None
        playing = bool(players)
        while True:
            if bool(players) != playing:
                playing = bool(players)
                await self._suspend(server, env, not playing)
            line = await events.stdout.readline()
            if not line:
                return
            match = SINK_INPUT_EVENT.search(line.decode(errors="replace"))
            if match is not None:
                if match.group(1) == "new":
                    players.add(int(match.group(2)))
                else:
                    players.discard(int(match.group(2)))

    async def _read(self, reader: asyncio.subprocess.Process) -> None:
        assert reader.stdout is not None
        next_sample: int | None = None
        while True:
            try:
                data = await reader.stdout.readexactly(CHUNK_BYTES)
            except asyncio.IncompleteReadError:
                return  # the sound server ended
            played = time.monotonic() - CAPTURE_DELAY_S - CHUNK_MS / 1000
            now_sample = self.sample_at(played)
            # Chunks follow each other sample for sample; after a suspended silence the clock jumps ahead.
            if next_sample is None or self._resumed or abs(now_sample - next_sample) > RESYNC_S * SAMPLE_RATE:
                next_sample = now_sample
                self._resumed = False
            if data == _SILENT_CHUNK:  # a player playing zeros: nothing to encode or send (listeners fill gaps)
                next_sample += CHUNK_SAMPLES
                self.silent_chunks += 1
                continue
            chunk = AudioChunk(data, self.epoch + next_sample / SAMPLE_RATE, next_sample)
            next_sample += CHUNK_SAMPLES
            self.chunks += 1
            for subscription in list(self._subscribers):
                subscription.push(chunk)


async def _pactl(env: dict[str, str], *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        "pactl", *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    out, _ = await proc.communicate()
    return out.decode(errors="replace")
