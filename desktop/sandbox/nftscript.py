"""The nftables scripts of a server's table: its skeleton, each desktop's chains, its rules, their removal.

One table per server (`inet sdnet_<pid>_<block>`) in the host's namespace, where a desktop cannot touch it
even as root in its own namespace (docs/sandbox-network.md, "How it is built"):

    forward      a desktop's IPv6 is dropped, and IPv4 from any source but its own address (`sources`: a root
                 inside cannot spoof another's); the rest jumps by its input link (`egress` map) to its chain
                 d<n>, which always decides; replies to a desktop pass; nothing else reaches one
    input        anything a desktop sends to the host itself (any of its addresses, any port, the server's
                 included) jumps to its refusal chain r<n> (`refuse` map)
    postrouting  the server's block leaves masqueraded as the host
    d<n>         the desktop's rules: `never` (loopback, 0/8, every desktop's range, broadcast) refused in
                 every mode, then per mode: all (`reserved`, link-local and multicast, refused), none, or
                 allowlist (sets h<n>: any port; p<n>: address . port)
    a<n>, r<n>   log new connections to the server's NFLOG group, then accept; or reject: `admin-prohibited`
                 for a new connection (EHOSTUNREACH, fast), a TCP reset for a flow the rules no longer allow

A desktop's creation only *adds* (its chain d<n> and map entry; the slot's chains were made in the pool), an
update replaces d<n> and the sets in one transaction, and a close removes the slot's all (`forget_script`)
after its link is down. Through libnftables each is a fraction of a millisecond (libnft.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from ipaddress import IPv4Address, IPv4Network

from desktop.sandbox.netrules import Destinations, EgressMode, NetworkRules

NEVER = ("0.0.0.0/8", "127.0.0.0/8", "255.255.255.255")
"""Refused whatever the rules say, with the whole desktops' range (other servers' desktops too)."""
RESERVED = ("169.254.0.0/16", "224.0.0.0/4", "240.0.0.0/5")
"""Refused by egress `all`: link-local (a cloud's metadata service) and multicast; an allowlist may list them."""
LOG_LIMIT = "limit rate 20/second burst 40 packets"
"""Per desktop and verdict: a desktop opening connections in a loop cannot flood the server's reader."""
FILTER_PRIORITY = "filter - 5"


def table_script(table: str, block: IPv4Network, supernet: IPv4Network, resolvers: Sequence[str]) -> str:
    """The server's table, created when it claims its block; `resolvers` get DNS in every mode but none."""
    never = ", ".join((*NEVER, str(supernet)))
    dns = f"elements = {{ {', '.join(resolvers)} }}" if resolvers else ""
    return f"""table inet {table} {{
  set links {{ type ifname; }}
  set sources {{ type ifname . ipv4_addr; }}
  map egress {{ type ifname : verdict; }}
  map refuse {{ type ifname : verdict; }}
  set never {{ type ipv4_addr; flags interval; elements = {{ {never} }} }}
  set reserved {{ type ipv4_addr; flags interval; elements = {{ {", ".join(RESERVED)} }} }}
  set resolvers {{ type ipv4_addr; {dns} }}
  chain forward {{
    type filter hook forward priority {FILTER_PRIORITY}; policy accept;
    iifname @links meta nfproto ipv6 drop
    iifname @links iifname . ip saddr != @sources drop
    iifname vmap @egress
    iifname @links drop
    oifname @links ct state established,related accept
    oifname @links drop
  }}
  chain input {{
    type filter hook input priority {FILTER_PRIORITY}; policy accept;
    iifname vmap @refuse
    iifname @links drop
  }}
  chain postrouting {{
    type nat hook postrouting priority srcnat + 5; policy accept;
    ip saddr {block} oifname != @links masquerade
  }}
}}
"""


def slot_script(table: str, slot: int, link: str, address: str, group: int) -> str:
    """A pooled slot's chains and sets: until its desktop's rules exist, its link is in `links` (dropped)."""
    t = f"inet {table}"
    return f"""add chain {t} a{slot}
add rule {t} a{slot} ct state new {LOG_LIMIT} log group {group} prefix "{slot} allowed"
add rule {t} a{slot} accept
add chain {t} r{slot}
add rule {t} r{slot} ct state new {LOG_LIMIT} log group {group} prefix "{slot} refused"
add rule {t} r{slot} ct state new reject with icmpx type admin-prohibited
add rule {t} r{slot} meta l4proto tcp reject with tcp reset
add rule {t} r{slot} reject with icmpx type admin-prohibited
add set {t} h{slot} {{ type ipv4_addr; flags interval; auto-merge; }}
add set {t} p{slot} {{ type ipv4_addr . inet_service; flags interval; }}
add element {t} links {{ "{link}" }}
add element {t} sources {{ "{link}" . {address} }}
add element {t} refuse {{ "{link}" : goto r{slot} }}
"""


def rules_script(table: str, slot: int, link: str, rules: NetworkRules, allowed: Destinations,
                 first: bool) -> str:
    """The desktop's chain d<n> and sets for `rules`; `first`: created now (adds only), else replaced whole
    in one transaction, so no packet ever sees half of the old rules and half of the new."""
    t = f"inet {table}"
    lines = [f"add chain {t} d{slot}"] if first else [f"flush chain {t} d{slot}", f"flush set {t} h{slot}",
                                                      f"flush set {t} p{slot}"]
    refuse, allow = f"goto r{slot}", f"goto a{slot}"
    chain = f"add rule {t} d{slot}"
    if rules.egress is EgressMode.NONE:
        lines.append(f"{chain} {refuse}")
    else:
        lines += [f"{chain} ip daddr @never {refuse}", f"{chain} meta l4proto {{ tcp, udp }} th dport 53 "
                  f"ip daddr @resolvers {allow}"]
        if rules.egress is EgressMode.ALL:
            lines += [f"{chain} ip daddr @reserved {refuse}", f"{chain} {allow}"]
        else:
            if allowed.any_port:
                lines.append(f"add element {t} h{slot} {{ {', '.join(map(str, allowed.any_port))} }}")
            pieces = [f"{_range(lo, hi, IPv4Address)} . {_range(p_lo, p_hi, str)}"
                      for (lo, hi), (p_lo, p_hi) in disjoint(allowed.ports)]
            if pieces:
                lines.append(f"add element {t} p{slot} {{ {', '.join(pieces)} }}")
            lines += [f"{chain} ip daddr @h{slot} {allow}",
                      f"{chain} meta l4proto {{ tcp, udp }} ip daddr . th dport @p{slot} {allow}", f"{chain} {refuse}"]
    if first:
        lines.append(f"add element {t} egress {{ \"{link}\" : goto d{slot} }}")
    return "\n".join(lines) + "\n"


def forget_script(table: str, slots: Iterable[tuple[int, str, str, bool]]) -> str:
    """Remove closed desktops' chains, sets and map entries: (slot, link, address, whether its rules were set)."""
    t = f"inet {table}"
    lines = []
    for slot, link, address, ruled in slots:
        if ruled:
            lines += [f"delete element {t} egress {{ \"{link}\" }}", f"delete chain {t} d{slot}"]
        lines += [f"delete element {t} refuse {{ \"{link}\" }}", f"delete element {t} links {{ \"{link}\" }}",
                  f"delete element {t} sources {{ \"{link}\" . {address} }}",
                  f"delete chain {t} a{slot}", f"delete chain {t} r{slot}", f"delete set {t} h{slot}",
                  f"delete set {t} p{slot}"]
    return "\n".join(lines) + "\n"


def disjoint(ports: Iterable[tuple[IPv4Network, int, int]]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(address range, port range) pieces covering exactly the union of `ports`, none overlapping another:
    the kernel's concatenated interval sets refuse overlapping elements ("10.0.0.0/8:443" beside
    "10.1.2.3:443")."""
    entries = [(int(net.network_address), int(net.broadcast_address), lo, hi) for net, lo, hi in ports]
    cuts = sorted({lo for *_, lo, _ in entries} | {hi + 1 for *_, hi in entries})
    previous: tuple[tuple[int, int], list[tuple[int, int]]] | None = None
    rows: list[tuple[tuple[int, int], list[tuple[int, int]]]] = []
    for p_lo, p_next in itertools.pairwise(cuts):
        addresses = _merge([(a_lo, a_hi) for a_lo, a_hi, lo, hi in entries if lo <= p_lo and p_next - 1 <= hi])
        if previous and previous[1] == addresses and previous[0][1] == p_lo - 1:
            previous = ((previous[0][0], p_next - 1), addresses)
            rows[-1] = previous
        elif addresses:
            previous = ((p_lo, p_next - 1), addresses)
            rows.append(previous)
        else:
            previous = None
    return [(address_range, port_range) for port_range, addresses in rows for address_range in addresses]


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def _range(lo: int, hi: int, show: type) -> str:
    return str(show(lo)) if lo == hi else f"{show(lo)}-{show(hi)}"
