"""`GET /v1/desktop/recordings/{id}/trajectory`: a recording and its actions as a dataset (docs/trajectories.md).

The zip is built in a temporary file off the event loop (a minute of video takes about a second), then
streamed and deleted.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import FileResponse, Response

from api.http.operations import Operation
from api.server.services import recordings_of
from desktop.core.errors import Conflict, invalid_action
from recording import trajectory, trajectory_export
from sandbox_desktop_wire.enums import RecordingState
from sandbox_desktop_wire.problems import ProblemCode
from sandbox_desktop_wire.trajectory import TrajectoryQuery


async def recording_trajectory(request: Request, query: TrajectoryQuery) -> Response:
    manager = recordings_of(request)
    record, video = await manager.file(request.path_params["id"])
    if record.status is RecordingState.RECORDING:
        raise Conflict(f"{record.id} is still recording; stop it first (POST /v1/desktop/recording/stop)")
    if query.parquet and not await asyncio.to_thread(trajectory_export.has_pyarrow):
        raise invalid_action("parquet=true needs pyarrow on the server (pip install pyarrow)", "parquet", "query")
    _, entries = await manager.actions(record.id)
    steps = trajectory.steps(entries, record.duration_ms, keep_moves=query.moves)
    handle, name = tempfile.mkstemp(prefix=f"{record.id}-trajectory-", suffix=".zip")
    os.close(handle)
    archive = Path(name)
    try:
        await asyncio.to_thread(trajectory_export.export, video, steps, archive,
                                image_format=query.image_format, parquet=query.parquet)
    except BaseException:
        archive.unlink(missing_ok=True)
        raise
    return FileResponse(archive, media_type="application/zip", filename=f"{record.id}-trajectory.zip",
                        background=BackgroundTask(archive.unlink, missing_ok=True))


OPERATIONS = [
    Operation("GET", "/v1/desktop/recordings/{id}/trajectory", recording_trajectory,
              "The recording as a dataset: steps.jsonl (one row per action, with the screens before and after) and "
              "the images, in a zip; steps.parquet too when the server has pyarrow",
              query=TrajectoryQuery, media_type="application/zip", invalid_code=ProblemCode.DESKTOP_INVALID_ACTION,
              errors=(400, 404, 409), tags=("recording",)),
]
