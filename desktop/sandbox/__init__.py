"""A desktop's sandbox: its own uid, namespaces, cgroup and network, the init that runs its programs, and the
zygote that forks every init (docs/security.md). Imports only desktop/core."""
