"""The desktop's sandbox: what keeps one desktop's processes apart from the host and from other desktops.

sandbox      one desktop's sandbox (sandbox.py): its own uid (users.py), namespaces, view of the files and X
             cookie (xauth.py); the init that is PID 1 in it and starts its programs (init.py), forked by the
             zygote (zygote.py) that the server's SandboxHost starts (host.py); what they say (protocol.py,
             channel.py), and a function run in it as its user (call.py); the layers a desktop reports (layers.py)
network      each desktop's own network namespace, its egress rules (all, none, an allowlist), host ports
             forwarded onto its loopback, and the log of its new connections (docs/sandbox-network.md);
             built from netrules (the rules), slots (namespaces and links), nftscript and libnft (the host's
             nftables table), nflog (the log), portforward, resolvers and nethost (`ip`, names, leftovers)
cgroups      each desktop's cgroups, a session and an apps part: limits (limits.py), usage, freeze and kill
             (docs/sandbox-limits.md); built from cgroup_layout (which hierarchy serves what) and cgroupfs

Imports only desktop/core.
"""
