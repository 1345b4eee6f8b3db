"""Images on the clipboard against a real Xvfb: `xclip -t image/png` on the other side, byte for byte.

A PNG written through the API is read back by `xclip -o -t image/png`; one `xclip -i -t image/png` owns is
read through the API; big images go in INCR chunks both ways; the text targets keep working next to it.
"""

from __future__ import annotations

import base64
import io
import os
import random
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image

from tests.conftest import assert_problem, wait_for

DESKTOP = {"displayNum": 711, "width": 800, "height": 600}
CLIP = "/v1/desktop/clipboard"


def png(width: int, height: int, seed: int) -> bytes:
    """A PNG of noise (so it does not compress: a big one is big on the wire too)."""
    rng = random.Random(seed)
    image = Image.frombytes("RGB", (width, height), rng.randbytes(width * height * 3))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def xclip(display: str, *args: str, data: bytes | None = None) -> bytes:
    # An `-i` forks a child that owns the selection until it is taken: it must not hold our pipes open.
    output = subprocess.DEVNULL if data is not None else subprocess.PIPE
    done = subprocess.run(["xclip", "-selection", "clipboard", *args], input=data, stdout=output, stderr=output,
                          timeout=30, env=dict(os.environ, DISPLAY=display))
    assert done.returncode == 0, done.stderr
    return done.stdout or b""


@pytest.fixture
def xclip_owner(display: str, tmp_path: Path) -> Iterator[Callable[[bytes, str], None]]:
    procs: list[subprocess.Popen[bytes]] = []

    def own(data: bytes, target: str) -> None:
        source = tmp_path / f"owned-{len(procs)}"
        source.write_bytes(data)
        with open(source, "rb") as stdin:
            procs.append(subprocess.Popen(["xclip", "-quiet", "-i", "-selection", "clipboard", "-t", target],
                                          stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          env=dict(os.environ, DISPLAY=display)))
        # Owned once another client sees xclip's targets (ours always list MULTIPLE and TIMESTAMP too).
        wait_for(lambda: xclip(display, "-o", "-t", "TARGETS").split() == [b"TARGETS", target.encode()],
                 f"xclip to own {target}")

    yield own
    for proc in procs:
        proc.kill()
        proc.wait()


def test_a_png_written_is_what_xclip_reads_and_text_targets_stay(api: httpx.Client, display: str) -> None:
    image = png(64, 48, 1)
    written = api.post(CLIP, json={"image": base64.b64encode(image).decode(), "text": "a caption ✓"})
    assert written.status_code == 200, written.text
    assert xclip(display, "-o", "-t", "image/png") == image
    targets = xclip(display, "-o", "-t", "TARGETS").split()
    assert b"image/png" in targets and b"UTF8_STRING" in targets, targets
    assert xclip(display, "-o", "-t", "UTF8_STRING").decode() == "a caption ✓"
    # ours, read back through the API in both formats
    assert api.get(CLIP, params={"format": "image"}).content == image
    assert api.get(CLIP).json() == {"text": "a caption ✓", "selection": "clipboard"}


def test_an_image_alone_offers_no_text(api: httpx.Client, display: str) -> None:
    image = png(8, 8, 2)
    assert api.post(CLIP, json={"image": base64.b64encode(image).decode()}).status_code == 200
    targets = xclip(display, "-o", "-t", "TARGETS").split()
    assert b"image/png" in targets and b"UTF8_STRING" not in targets, targets
    assert api.get(CLIP).json()["text"] == ""
    got = api.get(CLIP, headers={"Accept": "image/png"})
    assert got.headers["content-type"] == "image/png" and got.content == image


def test_a_png_another_app_copied_is_read_byte_identical(api: httpx.Client,
                                                         xclip_owner: Callable[[bytes, str], None]) -> None:
    image = png(32, 32, 3)
    xclip_owner(image, "image/png")
    response = api.get(CLIP, params={"format": "image"})
    assert response.status_code == 200 and response.headers["content-type"] == "image/png"
    assert response.content == image
    # (xclip answers a text request with the PNG's bytes too: what text reads then is xclip's choice)


def test_big_images_travel_in_incr_chunks_both_ways(api: httpx.Client, display: str,
                                                     xclip_owner: Callable[[bytes, str], None]) -> None:
    big = png(1000, 800, 4)
    assert len(big) > 2_000_000  # far over one X request (256 KB): INCR
    assert api.post(CLIP, json={"image": base64.b64encode(big).decode()}).status_code == 200
    assert xclip(display, "-o", "-t", "image/png") == big
    other = png(900, 700, 5)
    xclip_owner(other, "image/png")
    assert api.get(CLIP, params={"format": "image"}).content == other


def test_text_after_an_image_works_both_ways(api: httpx.Client, display: str) -> None:
    assert api.post(CLIP, json={"image": base64.b64encode(png(4, 4, 6)).decode()}).status_code == 200
    assert api.post(CLIP, json={"text": "plain again"}).status_code == 200
    assert xclip(display, "-o").decode() == "plain again"
    assert b"image/png" not in xclip(display, "-o", "-t", "TARGETS").split()
    assert_problem(api.get(CLIP, params={"format": "image"}), 404, "clipboard_no_image")
    xclip(display, "-i", data=b"from xclip")  # its forked child takes the selection a moment later
    wait_for(lambda: api.get(CLIP).json()["text"] == "from xclip", "the API to read what xclip copied")


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"image": "not base64!"}, 400, "image"),
    ({"image": base64.b64encode(b"GIF89a....").decode()}, 400, "image"),
    ({"selection": "clipboard"}, 422, "text"),
    ({"image": 5}, 422, "image"),
])
def test_write_mistakes_name_the_field(api: httpx.Client, body: dict[str, object], status: int, field: str) -> None:
    problem = assert_problem(api.post(CLIP, json=body), status)
    assert problem["errors"][0]["field"] == field, problem  # type: ignore[index]


def test_a_bad_format_names_it(api: httpx.Client) -> None:
    problem = assert_problem(api.get(CLIP, params={"format": "gif"}), 400, "desktop_invalid_action")
    assert problem["errors"][0]["field"] == "format"  # type: ignore[index]
