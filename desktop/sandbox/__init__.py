"""The sandbox: what makes each desktop a room of its own on a shared machine. Its cgroups (cgroups.py: memory,
pids and CPU limits, usage, freeze for pause, kill for reset and delete, on cgroup v1, v2 or both), and the
isolation the server gives the desktop's processes (an init inside the sandbox that spawns them, their uids,
namespaces, network). Built on core only; the lifecycle room applies it to each desktop (docs/sandbox-limits.md).
"""
