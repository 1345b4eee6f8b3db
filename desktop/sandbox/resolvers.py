"""Which DNS resolvers a desktop can use, and its /etc/resolv.conf.

A desktop has a loopback of its own, so a resolver the host runs on its loopback (systemd-resolved's stub
at 127.0.0.53, a local dnsmasq) is out of its reach; it needs the servers that resolver forwards to. These
come from /etc/resolv.conf when it names real servers, else from systemd-resolved's list of its upstreams
(/run/systemd/resolve/resolv.conf). The desktops' rules let DNS (port 53) to these addresses through in
modes `all` and `allowlist` (docs/sandbox-network.md, "DNS").
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

HOST_FILES = ("/etc/resolv.conf", "/run/systemd/resolve/resolv.conf")
MAX_RESOLVERS = 3
"""The C library reads at most three nameserver lines."""


def read_resolv_conf(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(IPv4 nameservers that are not loopback, search domains) of one resolv.conf's text."""
    servers: list[str] = []
    search: list[str] = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 2 and words[0] == "nameserver":
            try:
                address = ipaddress.ip_address(words[1])
            except ValueError:
                continue
            if address.version == 4 and not address.is_loopback and not address.is_unspecified:
                servers.append(str(address))
        elif words and words[0] in ("search", "domain"):
            search = words[1:]
    return tuple(dict.fromkeys(servers))[:MAX_RESOLVERS], tuple(search)


def host_resolvers(files: Sequence[str] = HOST_FILES) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The host's reachable resolvers and search domains: the first file that names a resolver wins."""
    search: tuple[str, ...] = ()
    for path in files:
        try:
            with open(path) as f:
                servers, found_search = read_resolv_conf(f.read())
        except OSError:
            continue
        search = search or found_search
        if servers:
            return servers, search
    return (), search


def resolv_conf(resolvers: Sequence[str], search: Sequence[str], reason: str) -> str:
    """The text of a desktop's /etc/resolv.conf; `reason` (its egress mode) is said in a comment."""
    lines = [f"# sandbox-desktop: this desktop's resolvers (egress {reason}; docs/sandbox-network.md)"]
    if not resolvers:
        lines.append("# no resolver is reachable from this desktop")
    lines += [f"nameserver {address}" for address in resolvers]
    if search:
        lines.append(f"search {' '.join(search)}")
    lines.append("options timeout:2 attempts:2")
    return "\n".join(lines) + "\n"
