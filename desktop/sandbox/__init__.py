"""The desktop's sandbox: what keeps one desktop's processes apart from the host and from other desktops.

network      each desktop's own network namespace, its egress rules (all, none, an allowlist), host ports
             forwarded onto its loopback, and the log of its new connections (docs/sandbox-network.md);
             built from netrules (the rules), slots (namespaces and links), nftscript and libnft (the host's
             nftables table), nflog (the log), portforward, resolvers and nethost (`ip`, names, leftovers)
cgroups      each desktop's cgroups, a session and an apps part: limits (limits.py), usage, freeze and kill
             (docs/sandbox-limits.md); built from cgroup_layout (which hierarchy serves what) and cgroupfs

Imports only desktop/core.
"""
