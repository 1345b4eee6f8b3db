"""A desktop's life: the `Desktop` that owns one session and its state machine (runtime.py), the supervisor of
its children, the X server, its HOME, options, status, readiness and the installer of its system packages. The top
room: it may import every other; none imports it."""
