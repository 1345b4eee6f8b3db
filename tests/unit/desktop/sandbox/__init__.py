"""desktop/sandbox/: the desktop's cgroups on real hierarchies, their limits, and how this machine is read."""
