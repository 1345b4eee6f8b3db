"""The PyAV writer: BGRX screen frames (and the desktop's sound) in, a crash-safe fragmented MP4 out.

Blocking and not thread-safe: one recording's writer is used from its one encoder thread only.
Timestamps are milliseconds on the capture clock (time base 1/1000), so the video plays at real
speed whatever the frame rate was; the fragments are flushed to the file at least every
`fragment_ms`, so a killed process leaves a file that plays up to about that long before the kill.
A screen resized while recording is scaled into the recording's size, aspect kept, letterboxed.

The x264 encoder is an `H264Encoder` of its own, muxed into the file as packets: a finished recording hands it
back (`Mp4Writer.reusable_encoder`) and the desktop's next recording of the same size and rate starts on it
warm. Opening one and encoding two pictures costs 14-19 ms of CPU at 1024x768, mostly the opening (in the
server, the kernel zeroing the memory x264 asks for), against ~4 ms for the same two pictures on a warm one; a
test harness starts a recording for every test (docs/recording.md, "How a recording is made").

The optional AAC track is stamped on the same clock, in samples (time base 1/48000): 40 ms chunks
go in at their sample position and the silence between bursts is filled with zeros, so the track is
continuous and every player keeps it in step with the video (docs/audio.md).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
from av.audio.frame import AudioFrame
from av.audio.resampler import AudioResampler
from av.video.frame import PictureType, VideoFrame
from av.video.reformatter import ColorRange, Colorspace, Interpolation

from desktop.sound.server import CHANNELS, CHUNK_SAMPLES, SAMPLE_BYTES, SAMPLE_RATE

TIME_BASE = Fraction(1, 1000)
AUDIO_TIME_BASE = Fraction(1, SAMPLE_RATE)
AUDIO_BITRATE = 128_000
FRAME_BYTES = CHANNELS * SAMPLE_BYTES
"""Bytes of one interleaved s16 stereo sample frame."""
_SILENCE = bytes(CHUNK_SAMPLES * FRAME_BYTES)
# ITU-T H.273 code points: BT.709 primaries, transfer and matrix, as sRGB screens are usually tagged.
BT709 = 1


@dataclass(frozen=True)
class EncoderSettings:
    """How recordings are encoded (measured choices: bench/recording.py, docs/recording.md)."""

    preset: str = "ultrafast"
    """x264 preset: `ultrafast` keeps a busy 1440x900 screen at 30 fps under a quarter of a core."""
    tune: str = "zerolatency"
    """No lookahead or B-frames: each frame leaves the encoder at once, so fragments stay current."""
    crf: int = 23
    """Constant quality; 23 keeps 9-point terminal text legible."""
    threads: int = 1
    """Encoder threads; more only add overhead on a 2-core box shared with the desktop."""
    keyframe_s: float = 2.0
    """At most this long between keyframes of a changing screen (seek granularity)."""
    fragment_ms: int = 500
    """Fragment length: what a crash can lose, at most (plus the time since the last frame)."""


class H264Encoder:
    """One x264 encoder (yuv420p, BT.709 limited range) and its own clock, which outlives a recording.

    Each picture out of zero-latency x264 comes out of the `encode` it went into (no B-frames, no lookahead,
    one thread), so a recording ends without draining it and the next one goes on with it: its clock keeps
    rising (x264 wants increasing timestamps), and each recording's packets are stamped from its own zero."""

    def __init__(self, width: int, height: int, fps: int, settings: EncoderSettings) -> None:
        self.width, self.height, self.fps, self.settings = width, height, fps, settings
        ctx = av.CodecContext.create("libx264", "w")
        ctx.width, ctx.height, ctx.pix_fmt = width, height, "yuv420p"
        ctx.time_base = TIME_BASE
        ctx.framerate = Fraction(fps, 1)  # x264's rate control reads it (the bits a picture may take)
        # Keyframes come from `keyframe_s` (time), not from a frame count that an idle screen never reaches.
        ctx.gop_size = 100_000
        ctx.thread_count = settings.threads
        ctx.options = {"preset": settings.preset, "tune": settings.tune, "crf": str(settings.crf)}
        ctx.colorspace = ctx.color_primaries = ctx.color_trc = BT709
        ctx.color_range = ColorRange.MPEG
        # No global header: every keyframe carries its parameter sets, so the muxer of each new file finds them
        # in its first packet (PyAV's extract_extradata), whichever recording the encoder served before.
        self._context: av.VideoCodecContext = ctx
        self._origin = 0
        """The encoder's clock (ms) at the current recording's zero."""
        self._last = -1
        self.pending = 0
        """Pictures in without their packet out: none, unless x264 was set to hold some back."""

    def matches(self, width: int, height: int, fps: int, settings: EncoderSettings) -> bool:
        return (self.width, self.height, self.fps, self.settings) == (width, height, fps, settings)

    def restart_clock(self) -> None:
        """A new recording starts: its zero is just after the last picture encoded."""
        self._origin = self._last + 1

    def encode(self, image: VideoFrame, at_ms: int, key: bool) -> list[av.Packet]:
        """Encode `image` at `at_ms` of the recording (a keyframe when `key`); packets stamped on that clock."""
        image.pts = self._origin + at_ms
        image.time_base = TIME_BASE
        image.pict_type = PictureType.I if key else PictureType.NONE
        packets = list(self._context.encode(image))
        self._last = self._origin + at_ms
        self.pending += 1 - len(packets)
        return self._restamped(packets)

    def drain(self) -> list[av.Packet]:
        """The pictures held back, if any (the encoder cannot be used again after this: `pending` stays)."""
        return self._restamped(list(self._context.encode(None)))

    def _restamped(self, packets: list[av.Packet]) -> list[av.Packet]:
        for packet in packets:
            assert packet.pts is not None and packet.dts is not None
            packet.pts -= self._origin
            packet.dts -= self._origin
        return packets


class Mp4Writer:
    """A fragmented MP4 (`frag_keyframe+empty_moov+default_base_moof`) with one H.264 yuv420p track."""

    def __init__(self, path: Path, width: int, height: int, fps: int,
                 settings: EncoderSettings | None = None, audio: bool = False,
                 encoder: H264Encoder | None = None) -> None:
        """`encoder`: a warm one from an earlier recording, used if it has this size, rate and settings."""
        self.settings = settings or EncoderSettings()
        # yuv420p needs even dimensions: an odd last row or column is left out.
        self.width = width - width % 2
        self.height = height - height % 2
        self.fps = fps
        self.frames = 0
        self.last_ms = -1
        self._last_key_ms: float = float("-inf")
        self._image: VideoFrame | None = None
        self._bgrx = VideoFrame(self.width, self.height, "bgra")
        self._box: tuple[int, int, int, int] | None = None
        """Where a frame of another size than the recording's goes (x, y, width, height), once scaled."""
        self.audio_samples = 0
        """Samples in the audio track so far (its next sample's position)."""
        self._audio_stream: av.AudioStream | None = None
        self._resampler: AudioResampler | None = None
        options = {
            "movflags": "frag_keyframe+empty_moov+default_base_moof",
            "frag_duration": str(self.settings.fragment_ms * 1000),
            "flush_packets": "1",  # hand each fragment to the kernel at once, not when a buffer fills
            # The muxer holds a stream's packets until every stream has one this recent; the recorder
            # keeps the audio current (silence included), this only bounds what a stall could hold back.
            "max_interleave_delta": str(self.settings.fragment_ms * 2000),
        }
        self._container = av.open(str(path), "w", format="mp4", options=options)
        try:
            if encoder is not None and encoder.matches(self.width, self.height, fps, self.settings):
                encoder.restart_clock()
            else:
                encoder = H264Encoder(self.width, self.height, fps, self.settings)
            self._video = encoder
            self._finished = False
            self._stream = self._container.add_mux_stream("h264", rate=fps, width=self.width, height=self.height)
            self._stream.time_base = TIME_BASE
            if audio:
                self._audio_stream = self._container.add_stream("aac", rate=SAMPLE_RATE)
                actx = self._audio_stream.codec_context
                actx.layout, actx.format, actx.bit_rate = "stereo", "fltp", AUDIO_BITRATE
                actx.time_base = AUDIO_TIME_BASE
                # AAC takes planar float frames of exactly 1024 samples; the chunks are s16 stereo of 960.
                self._resampler = AudioResampler(format="fltp", layout="stereo", rate=SAMPLE_RATE, frame_size=1024)
        except BaseException:
            self._container.close()
            raise

    def write(self, data: bytes, width: int, height: int, at_ms: int) -> None:
        """Convert and encode a new screen image shown from `at_ms` on."""
        self._fill(data, width, height)
        image = self._bgrx.reformat(format="yuv420p", dst_colorspace=Colorspace.ITU709,
                                    dst_color_range=ColorRange.MPEG, threads=1)
        self._image = image
        key = at_ms - self._last_key_ms >= self.settings.keyframe_s * 1000
        self._encode(image, at_ms, key)

    @property
    def has_audio(self) -> bool:
        return self._audio_stream is not None

    def write_audio(self, data: bytes, sample: int) -> None:
        """Encode s16 stereo `data` whose first sample plays at `sample` (1/48000 s since time zero).

        A gap since the last chunk is filled with silence; what overlaps audio already written (or
        precedes time zero) is left out, so the track stays continuous and in step with the video."""
        skip = self.audio_samples - sample
        if skip > 0:
            data = data[skip * FRAME_BYTES:]
        else:
            self.fill_audio(sample)
        if data:
            self._encode_audio(data)

    def fill_audio(self, until: int) -> None:
        """Silence up to sample `until` (the recorder keeps the track current while nothing plays)."""
        while self.audio_samples < until:
            self._encode_audio(_SILENCE[:min(CHUNK_SAMPLES, until - self.audio_samples) * FRAME_BYTES])

    def _encode_audio(self, data: bytes) -> None:
        assert self._audio_stream is not None and self._resampler is not None
        samples = len(data) // FRAME_BYTES
        frame = AudioFrame(format="s16", layout="stereo", samples=samples)
        frame.planes[0].update(data[:samples * FRAME_BYTES])
        frame.sample_rate = SAMPLE_RATE
        frame.pts = self.audio_samples
        frame.time_base = AUDIO_TIME_BASE
        self.audio_samples += samples
        for chunk in self._resampler.resample(frame):
            for packet in self._audio_stream.encode(chunk):
                self._container.mux(packet)

    def _flush_audio(self) -> None:
        if self._audio_stream is None or self._resampler is None:
            return
        for chunk in self._resampler.resample(None):
            for packet in self._audio_stream.encode(chunk):
                self._container.mux(packet)
        for packet in self._audio_stream.encode(None):
            self._container.mux(packet)

    def repeat(self, at_ms: int) -> bool:
        """Encode the last image again at `at_ms` (nearly free: every block is skipped); False if none yet."""
        if self._image is None:
            return False
        self._encode(self._image, at_ms, False)
        return True

    def finish(self, end_ms: int) -> None:
        """Make the last image last until `end_ms`, then drain the encoder and close the file."""
        try:
            if self._image is not None and end_ms > self.last_ms + 1:
                at = max(self.last_ms + 1, end_ms - max(1, round(1000 / self.fps)))
                self._encode(self._image, at, False, duration=end_ms - at)
            if self._video.pending:  # never with zero-latency x264; its last pictures then end the file
                self._mux_video(self._video.drain())
            if self.has_audio:  # the sound lasts as long as the picture (silence since the last chunk)
                self.fill_audio(end_ms * SAMPLE_RATE // 1000)
            self._flush_audio()
            self._finished = True  # the encoder is whole, however closing the file goes
        finally:
            self._container.close()

    def reusable_encoder(self) -> H264Encoder | None:
        """After a clean `finish`, the x264 encoder, for the next recording of this size and rate (None after a
        failure)."""
        return self._video if self._finished and not self._video.pending else None

    def abort(self) -> None:
        """Close after a failure, ignoring further errors (the file keeps what was flushed)."""
        with contextlib.suppress(Exception):  # the original error is what the caller reports
            self._container.close()

    def _fill(self, data: bytes, width: int, height: int) -> None:
        """Copy a BGRX image into the reused frame: cropped by the odd last row or column the encoder leaves
        out, or, when the screen was resized since the start, scaled to fit with black bars."""
        plane = self._bgrx.planes[0]
        row = self.width * 4
        if width - width % 2 != self.width or height - height % 2 != self.height:
            self._letterbox(data, width, height)
            return
        self._box = None  # the whole frame is the picture again
        if width == self.width and height == self.height and plane.line_size == row:
            plane.update(data)
            return
        # Odd sizes or a padded line: copy row by row (rare; ~1 ms at 1440x900).
        _copy_rows(memoryview(data), width * 4, plane, 0, 0, min(row, width * 4), min(height, self.height))

    def _letterbox(self, data: bytes, width: int, height: int) -> None:
        """Scale a frame of another size into the recording's, aspect kept, centred on black."""
        scale = min(self.width / width, self.height / height)
        box_w = max(2, min(self.width, round(width * scale)))
        box_h = max(2, min(self.height, round(height * scale)))
        box = ((self.width - box_w) // 2, (self.height - box_h) // 2, box_w, box_h)
        plane = self._bgrx.planes[0]
        if box != self._box:  # the bars are black once; only the picture inside them changes
            memoryview(plane)[:] = bytes(plane.buffer_size)
            self._box = box
        source = VideoFrame(width, height, "bgra")
        source_plane = source.planes[0]
        if source_plane.line_size == width * 4:
            source_plane.update(data)
        else:
            _copy_rows(memoryview(data), width * 4, source_plane, 0, 0, width * 4, height)
        scaled = source.reformat(width=box_w, height=box_h, interpolation=Interpolation.AREA, threads=1)
        scaled_plane = scaled.planes[0]
        _copy_rows(memoryview(scaled_plane), scaled_plane.line_size, plane, box[0], box[1], box_w * 4, box_h)

    def _encode(self, image: VideoFrame, at_ms: int, key: bool, duration: int = 0) -> None:
        at_ms = max(at_ms, self.last_ms + 1)  # timestamps must strictly increase
        if key:
            self._last_key_ms = at_ms
        packets = self._video.encode(image, at_ms, key)
        if duration:
            for packet in packets:
                packet.duration = duration
        self._mux_video(packets)
        self.last_ms = at_ms
        self.frames += 1

    def _mux_video(self, packets: list[av.Packet]) -> None:
        for packet in packets:
            packet.stream = self._stream  # the packet keeps the encoder's time base; the muxer rescales it
            self._container.mux(packet)


def _copy_rows(source: memoryview, source_stride: int, target_plane: av.video.plane.VideoPlane, x: int, y: int,
               row_bytes: int, rows: int) -> None:
    """Copy `rows` rows of `row_bytes` from `source` into the plane at pixel (x, y)."""
    target = memoryview(target_plane)
    stride = target_plane.line_size
    for r in range(rows):
        start = (y + r) * stride + x * 4
        target[start:start + row_bytes] = source[r * source_stride:r * source_stride + row_bytes]
