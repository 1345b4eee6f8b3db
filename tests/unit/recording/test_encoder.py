"""The MP4 writer on its own (recording/encoder.py): frames of another size than the recording's are scaled in,
letterboxed; the audio track is continuous and survives a crash as the video does (recording/mp4file.py)."""

from __future__ import annotations

import array
import math
import shutil
import struct
from pathlib import Path

import av
from av.audio.frame import AudioFrame
from av.video.frame import VideoFrame

from recording.encoder import EncoderSettings, Mp4Writer
from recording.mp4file import probe, repair

W, H = 320, 240
RED, GREEN, BLUE = (0, 0, 255, 0), (0, 255, 0, 0), (255, 0, 0, 0)  # BGRX


def solid(width: int, height: int, bgrx: tuple[int, int, int, int]) -> bytes:
    return bytes(bgrx) * (width * height)


def pixel(frame: VideoFrame, x: int, y: int) -> tuple[int, int, int]:
    r, g, b = frame.to_image().getpixel((x, y))
    return r, g, b


def near(rgb: tuple[int, int, int], expected: tuple[int, int, int], tolerance: int = 40) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(rgb, expected, strict=True))


def decoded(path: Path) -> list[VideoFrame]:
    with av.open(str(path)) as container:
        return list(container.decode(video=0))


def test_frames_of_another_size_are_scaled_in_with_black_bars(tmp_path: Path) -> None:
    path = tmp_path / "resized.mp4"
    writer = Mp4Writer(path, W, H, 30)
    writer.write(solid(W, H, RED), W, H, 0)
    writer.write(solid(160, 240, GREEN), 160, 240, 100)   # taller: bars left and right
    writer.write(solid(640, 240, BLUE), 640, 240, 200)    # wider: bars above and below
    writer.write(solid(640, 480, GREEN), 640, 480, 300)   # same aspect, twice as large: fills the frame
    writer.write(solid(W + 1, H + 1, RED), W + 1, H + 1, 400)  # an odd size is cropped, not scaled
    writer.finish(500)
    frames = decoded(path)[:5]  # finish() repeats the last one until the end
    assert [(f.width, f.height) for f in frames] == [(W, H)] * 5
    red, pillar, letter, full, odd = frames
    assert near(pixel(red, 5, 5), (255, 0, 0))
    # 160x240 fits as 160x240 centred: black from x=0 to 79, green from 80 to 239.
    assert near(pixel(pillar, 20, H // 2), (0, 0, 0)) and near(pixel(pillar, W - 20, H // 2), (0, 0, 0))
    assert near(pixel(pillar, W // 2, 10), (0, 255, 0)) and near(pixel(pillar, 90, H // 2), (0, 255, 0))
    # 640x240 fits as 320x120 centred: black rows 0-59 and 180-239.
    assert near(pixel(letter, W // 2, 20), (0, 0, 0)) and near(pixel(letter, W // 2, H - 20), (0, 0, 0))
    assert near(pixel(letter, 5, H // 2), (0, 0, 255))
    assert near(pixel(full, 2, 2), (0, 255, 0)) and near(pixel(full, W - 3, H - 3), (0, 255, 0))
    assert near(pixel(odd, 2, 2), (255, 0, 0)) and near(pixel(odd, W - 3, H - 3), (255, 0, 0))


def test_a_picture_that_changes_inside_the_bars_keeps_them_black(tmp_path: Path) -> None:
    path = tmp_path / "bars.mp4"
    writer = Mp4Writer(path, W, H, 30)
    writer.write(solid(W, H, RED), W, H, 0)
    writer.write(solid(160, 240, GREEN), 160, 240, 100)
    writer.write(solid(160, 240, BLUE), 160, 240, 200)
    writer.finish(300)
    last = decoded(path)[-1]
    assert near(pixel(last, 20, H // 2), (0, 0, 0)) and near(pixel(last, W // 2, H // 2), (0, 0, 255))


def test_a_warm_encoder_starts_each_recording_on_its_own_keyframe(tmp_path: Path) -> None:
    """The desktop's next recording reuses the last one's x264 encoder: each file still starts at zero with a
    keyframe carrying its parameter sets, so it plays alone, with the pictures it was given."""
    first, second = tmp_path / "first.mp4", tmp_path / "second.mp4"
    writer = Mp4Writer(first, W, H, 30)
    writer.write(solid(W, H, RED), W, H, 0)
    writer.write(solid(W, H, GREEN), W, H, 100)
    writer.finish(300)
    encoder = writer.reusable_encoder()
    assert encoder is not None
    again = Mp4Writer(second, W, H, 30, encoder=encoder)
    again.write(solid(W, H, BLUE), W, H, 0)
    again.write(solid(W, H, RED), W, H, 150)
    again.finish(400)
    assert again.reusable_encoder() is encoder
    expected = ((first, [(255, 0, 0), (0, 255, 0)], 300), (second, [(0, 0, 255), (255, 0, 0)], 400))
    for path, colours, duration in expected:
        with av.open(str(path)) as container:
            frames = list(container.decode(video=0))
            assert container.duration is not None and abs(container.duration / 1000 - duration) <= 40
        assert frames[0].key_frame and frames[0].pts == 0
        assert [near(pixel(f, W // 2, H // 2), c) for f, c in zip(frames, colours, strict=False)] == [True, True]
        assert probe(path).duration_ms == duration


def test_an_encoder_of_another_size_or_rate_is_not_reused_nor_one_whose_recording_failed(tmp_path: Path) -> None:
    writer = Mp4Writer(tmp_path / "a.mp4", W, H, 30)
    writer.write(solid(W, H, RED), W, H, 0)
    writer.finish(100)
    encoder = writer.reusable_encoder()
    other = Mp4Writer(tmp_path / "b.mp4", 2 * W, H, 30, encoder=encoder)
    other.write(solid(2 * W, H, GREEN), 2 * W, H, 0)
    other.finish(100)
    assert other.reusable_encoder() not in (None, encoder)
    assert decoded(tmp_path / "b.mp4")[0].width == 2 * W
    slower = Mp4Writer(tmp_path / "slower.mp4", W, H, 10, encoder=encoder)  # x264's rate control reads the rate
    slower.write(solid(W, H, GREEN), W, H, 0)
    slower.finish(100)
    assert slower.reusable_encoder() not in (None, encoder)
    aborted = Mp4Writer(tmp_path / "c.mp4", W, H, 30, encoder=encoder)
    aborted.write(solid(W, H, RED), W, H, 0)
    aborted.abort()
    assert aborted.reusable_encoder() is None


def tone_chunk(first: int, samples: int = 960, hz: float = 440.0) -> bytes:
    return b"".join(struct.pack("<hh", v, v) for v in (int(10000 * math.sin(2 * math.pi * hz * (first + i) / 48000))
                                                        for i in range(samples)))


def test_audio_gaps_become_silence_and_a_torn_file_keeps_both_tracks(tmp_path: Path) -> None:
    path = tmp_path / "av.mp4"
    writer = Mp4Writer(path, W, H, 10, EncoderSettings(fragment_ms=200), audio=True)
    for k in range(20):  # 2 s of video, sound from 0.5 s to 1.0 s and from 1.5 s on
        writer.write(solid(W, H, RED if k % 2 else GREEN), W, H, k * 100)
        at = k * 4800
        if 24000 <= at < 48000 or at >= 72000:
            for j in range(5):
                writer.write_audio(tone_chunk(at + j * 960), at + j * 960)
    assert writer.audio_samples == 96000
    # What a crash leaves: the file as flushed so far, with a torn last box.
    torn = tmp_path / "torn.mp4"
    shutil.copyfile(path, torn)
    with open(torn, "r+b") as fh:
        fh.truncate(torn.stat().st_size - 7)
    writer.finish(2000)

    with av.open(str(path)) as container:
        audio = list(container.decode(audio=0))
    assert sum(f.samples for f in audio) >= 96000
    loud = [float(f.pts * f.time_base) for f in audio if peak(f) > 0.1]
    assert 0.45 < loud[0] < 0.55, "the first sound where it was played"
    assert not any(1.05 < t < 1.45 for t in loud), "the gap is silence"
    assert any(1.45 < t < 1.6 for t in loud), "the second burst where it was played"

    tail = repair(torn)
    assert not tail.finalised
    assert probe(torn).frames >= 10
    with av.open(str(torn)) as container:
        assert [s.type for s in container.streams] == ["video", "audio"]
        kept = list(container.decode(audio=0))
    assert sum(f.samples for f in kept) >= 48000, "the torn file still holds its first second of sound"


def peak(frame: AudioFrame) -> float:
    """The loudest sample of a decoded AAC frame's first channel (planar float)."""
    return max(abs(v) for v in array.array("f", bytes(frame.planes[0]))[:frame.samples])
