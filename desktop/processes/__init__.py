"""The process registry: children started by the API and by the desktop, their logs and exits."""

from desktop.processes.logs import STREAM_FILTERS, LogBuffer, LogEntry, Stream, StreamFilter
from desktop.processes.managed import ManagedProcess, Owner
from desktop.processes.registry import ProcessConfig, ProcessManager
from desktop.processes.runner import RunResult
from desktop.processes.spawn_errors import SpawnError

__all__ = [
    "STREAM_FILTERS",
    "LogBuffer",
    "LogEntry",
    "ManagedProcess",
    "Owner",
    "ProcessConfig",
    "ProcessManager",
    "RunResult",
    "SpawnError",
    "Stream",
    "StreamFilter",
]
