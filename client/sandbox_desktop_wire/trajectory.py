"""Wire model of `GET /v1/desktop/recordings/{id}/trajectory` (docs/trajectories.md)."""

from __future__ import annotations

import enum

from pydantic import Field

from sandbox_desktop_wire.base import QueryModel


class TrajectoryImageFormat(enum.StrEnum):
    """How the screens of a trajectory are stored."""

    PNG = "png"
    JPEG = "jpeg"


class TrajectoryQuery(QueryModel):
    image_format: TrajectoryImageFormat = Field(default=TrajectoryImageFormat.PNG,
                                                description="png (lossless, default) or jpeg (quality 90)")
    parquet: bool | None = Field(default=None, description="Add steps.parquet (images inside, for the Hugging Face "
                                 "`datasets` library); default: when the server has pyarrow; true without pyarrow "
                                 "is a 400")
    moves: bool = Field(default=False, description="Keep pointer moves that only lead to a click, a drag or a "
                        "scroll as steps of their own")
