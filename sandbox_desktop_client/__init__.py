"""A typed Python client (sync and async, on httpx) for the sandbox-desktop HTTP API."""

from ._base import Call, Progress, Screenshot
from .async_client import AsyncClient
from .client import Client
from .errors import ApiError, ClientError, ConflictError, NotFoundError, ServerError

__all__ = ["ApiError", "AsyncClient", "Call", "Client", "ClientError", "ConflictError", "NotFoundError",
           "Progress", "Screenshot", "ServerError"]
