"""The desktop's sandbox: what keeps one desktop's processes apart from the host and from other desktops.

network      each desktop's own network namespace, its egress rules (all, none, an allowlist), host ports
             forwarded onto its loopback, and the log of its new connections (docs/sandbox-network.md)

Imports only desktop/core.
"""
