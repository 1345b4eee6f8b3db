"""The process registry: children started by the API and by the desktop, their logs and exits."""

from desktop.processes.logs import STREAM_FILTERS, LogBuffer, LogEntry
from desktop.processes.managed import ManagedProcess
from desktop.processes.registry import ProcessConfig, ProcessManager
from desktop.processes.runner import RunResult
from desktop.processes.spawn_errors import SpawnError

__all__ = [
    "STREAM_FILTERS",
    "LogBuffer",
    "LogEntry",
    "ManagedProcess",
    "ProcessConfig",
    "ProcessManager",
    "RunResult",
    "SpawnError",
]
