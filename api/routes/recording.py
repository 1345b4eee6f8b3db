"""`/v1/desktop/recording*`: translates HTTP to calls of `recording.manager.RecordingManager`.

Downloads are streamed from disk in chunks with single-range support (`bytes=a-b`, `bytes=a-`,
`bytes=-n`), also while the recording grows: a request gets the bytes present when it arrived.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from api.http.file_response import FileStreamResponse, byte_range
from api.http.operations import Operation
from api.server.services import recordings_of
from desktop.core.errors import NotFound
from desktop.files.filesystem import ReadHandle
from recording.action_track import webvtt
from recording.catalog import RecordingRecord
from sandbox_desktop_wire.enums import RecordingState
from sandbox_desktop_wire.problems import ProblemCode
from sandbox_desktop_wire.recording import (
    DesktopRecordingActions,
    DesktopRecordingInfo,
    DesktopRecordingListResponse,
    DesktopRecordingStartRequest,
)

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
TAGS = ("recording",)


class VideoFileResponse(FileStreamResponse):
    media_type = "video/mp4"


def info_model(record: RecordingRecord) -> DesktopRecordingInfo:
    return DesktopRecordingInfo(
        id=record.id, status=record.status, process_id=None, file_name=record.file_name,
        bytes=record.size, started_at=record.started_at, ended_at=record.ended_at,
        duration_ms=record.duration_ms, frames=record.frames, fps=record.fps, width=record.width,
        height=record.height, last_error=record.last_error, audio=record.audio,
    )


def open_range(path: Path, header: str | None) -> tuple[ReadHandle, tuple[int, int] | None, int]:
    """Open the file positioned at the range's start (blocking); a handle that reads exactly the range."""
    fh = open(path, "rb")  # noqa: SIM115 - the response closes it
    try:
        st = os.fstat(fh.fileno())
        span = byte_range(header, st.st_size)
        first, last = span or (0, st.st_size - 1)
        fh.seek(first)
        return ReadHandle(fh, path, last - first + 1, st.st_mtime_ns), span, st.st_size
    except BaseException:
        fh.close()
        raise


# -- handlers ------------------------------------------------------------------------------------


async def start_recording(request: Request, *, body: DesktopRecordingStartRequest) -> DesktopRecordingInfo:
    return info_model(await recordings_of(request).start_recording(body.fps, body.audio))


async def stop_recording(request: Request) -> DesktopRecordingInfo:
    return info_model(await recordings_of(request).stop_recording())


async def list_recordings(request: Request) -> DesktopRecordingListResponse:
    records = await recordings_of(request).list_recordings()
    return DesktopRecordingListResponse(recordings=[info_model(r) for r in records])


async def get_recording(request: Request) -> DesktopRecordingInfo:
    return info_model(await recordings_of(request).get(request.path_params["id"]))


async def download_recording(request: Request) -> Response:
    record, path = await recordings_of(request).file(request.path_params["id"])
    try:
        handle, span, size = await asyncio.to_thread(open_range, path, request.headers.get("range"))
    except FileNotFoundError:
        raise NotFound("desktop_recording_file", record.id, f"the file of {record.id} is gone") from None
    response = VideoFileResponse(handle)
    response.headers["accept-ranges"] = "bytes"
    response.headers["content-disposition"] = f'attachment; filename="{record.file_name}"'
    response.headers["cache-control"] = "no-store" if record.status is RecordingState.RECORDING else "no-cache"
    if span is not None:
        response.status_code = 206
        response.headers["content-range"] = f"bytes {span[0]}-{span[1]}/{size}"
    return response


async def recording_actions(request: Request) -> DesktopRecordingActions:
    record, entries = await recordings_of(request).actions(request.path_params["id"])
    return DesktopRecordingActions(recording_id=record.id, entries=[tracked.to_wire() for tracked in entries])


async def recording_chapters(request: Request) -> Response:
    record, entries = await recordings_of(request).actions(request.path_params["id"])
    return Response(webvtt(entries), media_type="text/vtt; charset=utf-8",
                    headers={"content-disposition": f'inline; filename="{record.id}.actions.vtt"'})


async def delete_recording(request: Request) -> None:
    await recordings_of(request).delete(request.path_params["id"])


OPERATIONS = [
    Operation("POST", "/v1/desktop/recording/start", start_recording,
              "Start recording the desktop to an MP4 (H.264, with the desktop's sound as AAC); one at a time",
              body=DesktopRecordingStartRequest, response=DesktopRecordingInfo, invalid_code=INVALID,
              errors=(409, 502, 503), tags=TAGS),
    Operation("POST", "/v1/desktop/recording/stop", stop_recording,
              "Stop the active recording; answers once the file is finalised",
              response=DesktopRecordingInfo, errors=(409,), tags=TAGS),
    Operation("GET", "/v1/desktop/recordings", list_recordings,
              "Recordings of the desktop's state directory, in id order, surviving restarts",
              response=DesktopRecordingListResponse, errors=(502,), tags=TAGS),
    Operation("GET", "/v1/desktop/recordings/{id}", get_recording, "One recording",
              response=DesktopRecordingInfo, errors=(404,), tags=TAGS),
    Operation("GET", "/v1/desktop/recordings/{id}/download", download_recording,
              "The MP4, streamed; supports a single Range (206, or 416); works while recording",
              media_type="video/mp4", ranges=True, errors=(404, 416), tags=TAGS),
    Operation("GET", "/v1/desktop/recordings/{id}/actions", recording_actions,
              "The actions executed while it recorded, with `videoMs` (time in the video)",
              response=DesktopRecordingActions, errors=(404,), tags=TAGS),
    Operation("GET", "/v1/desktop/recordings/{id}/actions.vtt", recording_chapters,
              "The actions as WebVTT chapters: one cue per action, for a video player",
              media_type="text/vtt", errors=(404,), tags=TAGS),
    Operation("DELETE", "/v1/desktop/recordings/{id}", delete_recording,
              "Delete a recording's video and metadata (not the active one)",
              status=204, errors=(404, 409), tags=TAGS),
]
