"""The parts of a desktop's network that need no root: the rules as a caller writes them (and the 4xx naming
the field for each mistake), the allowlist's pieces for nftables, resolv.conf, and the NFLOG parser."""

from __future__ import annotations

import asyncio
import socket
import struct
from ipaddress import IPv4Network

import pytest

from desktop.core.errors import InvalidAction
from desktop.sandbox import nflog
from desktop.sandbox.nethost import dropping_forward_chains
from desktop.sandbox.netrules import AllowRule, Destinations, EgressMode, NetworkRules, resolve
from desktop.sandbox.nftscript import disjoint, rules_script
from desktop.sandbox.resolvers import read_resolv_conf, resolv_conf


def test_every_accepted_form_parses() -> None:
    rules = NetworkRules.parse("allowlist", [" 10.1.2.3 ", "10.1.0.0/16", "Example.COM", "10.1.2.3:443",
                                             "10.0.0.0/8:8000-8100", "example.com:53"], [5432, "6379"])
    assert rules.egress is EgressMode.ALLOWLIST
    assert rules.allow == (
        AllowRule("10.1.2.3", IPv4Network("10.1.2.3/32"), None, None),
        AllowRule("10.1.0.0/16", IPv4Network("10.1.0.0/16"), None, None),
        AllowRule("example.com", None, "example.com", None),
        AllowRule("10.1.2.3:443", IPv4Network("10.1.2.3/32"), None, (443, 443)),
        AllowRule("10.0.0.0/8:8000-8100", IPv4Network("10.0.0.0/8"), None, (8000, 8100)),
        AllowRule("example.com:53", None, "example.com", (53, 53)))
    assert rules.forward_host_ports == (5432, 6379)
    assert NetworkRules.parse() == NetworkRules() == NetworkRules.parse("all", [], [])
    assert rules.to_wire()["allow"][2] == "example.com"


@pytest.mark.parametrize(("egress", "allow", "ports", "field", "says"), [
    ("everything", None, None, "network.egress", "one of all, none, allowlist"),
    (3, None, None, "network.egress", "one of"),
    ("all", ["10.0.0.1"], None, "network.allow", "only with egress 'allowlist'"),
    ("allowlist", "10.0.0.1", None, "network.allow", "must be a list"),
    ("allowlist", ["10.0.0.1:0"], None, "network.allow[0]", "out of range"),
    ("allowlist", ["ok.example", "h:65536"], None, "network.allow[1]", "out of range"),
    ("allowlist", ["h:80-20"], None, "network.allow[0]", "range 80-20 is empty"),
    ("allowlist", ["h:http"], None, "network.allow[0]", "must end in a port"),
    ("allowlist", ["h:"], None, "network.allow[0]", "must end in a port"),
    ("allowlist", ["h:\u00b3"], None, "network.allow[0]", "must end in a port"),  # str.isdigit() says a digit
    ("none", None, ["\u00b2"], "network.forwardHostPorts[0]", "must be a port number"),
    ("allowlist", ["[::1]:80"], None, "network.allow[0]", "IPv6"),
    ("allowlist", ["2001:db8::1"], None, "network.allow[0]", "IPv6"),
    ("allowlist", ["300.1.1.1"], None, "network.allow[0]", "neither an IPv4 address"),
    ("allowlist", ["10.0.0.0/40"], None, "network.allow[0]", "neither an IPv4 address"),
    ("allowlist", ["bad_name.example"], None, "network.allow[0]", "neither"),
    ("allowlist", [""], None, "network.allow[0]", "is empty"),
    ("allowlist", [443], None, "network.allow[0]", "must be a string"),
    ("allowlist", ["h"] * 257, None, "network.allow", "at most 256"),
    ("none", None, [80, 0], "network.forwardHostPorts[1]", "out of range"),
    ("none", None, [True], "network.forwardHostPorts[0]", "must be a port number"),
    ("none", None, [80, 80], "network.forwardHostPorts[1]", "listed twice"),
    ("none", None, 80, "network.forwardHostPorts", "must be a list"),
])
def test_each_mistake_is_a_4xx_naming_its_field(egress: object, allow: object, ports: object, field: str,
                                                says: str) -> None:
    with pytest.raises(InvalidAction) as caught:
        NetworkRules.parse(egress, allow, ports)
    assert says in caught.value.message
    assert caught.value.extensions["errors"][0]["field"] == field
    assert field in caught.value.message


def test_host_names_resolve_when_applied_and_a_name_that_does_not_is_named() -> None:
    rules = NetworkRules.parse("allowlist", ["localhost:80", "10.0.0.0/8", "localhost"])
    found = asyncio.run(resolve(rules))
    assert found == Destinations((IPv4Network("10.0.0.0/8"), IPv4Network("127.0.0.1/32")),
                                 ((IPv4Network("127.0.0.1/32"), 80, 80),))
    with pytest.raises(InvalidAction, match=r"desktops\.allow\[1\]: the host 'nothing\.invalid' does not resolve"):
        asyncio.run(resolve(NetworkRules.parse("allowlist", ["10.0.0.1", "nothing.invalid:1"]), "desktops"))


def test_overlapping_allowlist_entries_become_disjoint_pieces() -> None:
    wide, narrow = IPv4Network("10.0.0.0/8"), IPv4Network("10.1.0.0/16")
    pieces = disjoint([(wide, 400, 500), (narrow, 450, 600), (wide, 443, 443), (IPv4Network("10.1.2.3"), 443, 443)])
    assert pieces == [((int(wide.network_address), int(wide.broadcast_address)), (400, 500)),
                      ((int(narrow.network_address), int(narrow.broadcast_address)), (501, 600))]
    assert disjoint([]) == []
    # Neighbouring blocks on one port merge into one range; separate ones stay apart.
    a, b, c = IPv4Network("10.0.0.0/24"), IPv4Network("10.0.1.0/24"), IPv4Network("10.9.0.0/24")
    assert disjoint([(a, 80, 80), (b, 80, 80), (c, 80, 80)]) == [
        ((int(a.network_address), int(b.broadcast_address)), (80, 80)),
        ((int(c.network_address), int(c.broadcast_address)), (80, 80))]


def test_the_rules_script_of_each_mode() -> None:
    none = rules_script("t", 7, "sdn0-7", NetworkRules.parse("none"), Destinations(), first=True)
    assert "add rule inet t d7 goto r7" in none and "@resolvers" not in none
    replaced = rules_script("t", 7, "sdn0-7", NetworkRules(), Destinations(), first=False)
    assert replaced.startswith("flush chain inet t d7\n") and "egress" not in replaced
    listed = rules_script("t", 7, "sdn0-7", NetworkRules.parse("allowlist", ["10.0.0.1:22"]),
                          Destinations(ports=((IPv4Network("10.0.0.1/32"), 22, 22),)), first=True)
    assert "add element inet t p7 { 10.0.0.1 . 22 }" in listed
    assert listed.index("@never") < listed.index("@resolvers") < listed.index("@p7")


def test_resolvers_on_the_hosts_loopback_are_left_out() -> None:
    text = "# comment\nnameserver 127.0.0.53\nnameserver 10.0.0.2 # upstream\nnameserver ::1\n" \
           "nameserver 2001:db8::53\nsearch corp.example lab.example\noptions edns0\n"
    assert read_resolv_conf(text) == (("10.0.0.2",), ("corp.example", "lab.example"))
    conf = resolv_conf(("10.0.0.2",), ("corp.example",), "all")
    assert "nameserver 10.0.0.2\nsearch corp.example\n" in conf
    assert "no resolver is reachable" in resolv_conf((), (), "none")


def packet_message(prefix: bytes, payload: bytes, group: int = 7) -> bytes:
    def attribute(kind: int, data: bytes) -> bytes:
        return struct.pack("=HH", 4 + len(data), kind) + data + b"\0" * (-len(data) % 4)
    body = struct.pack("=BBH", socket.AF_INET, 0, socket.htons(group)) + attribute(
        1, struct.pack("!HBx", 0x0800, 2)) + attribute(nflog.NFULA_PREFIX, prefix + b"\0") + attribute(
        nflog.NFULA_PAYLOAD, payload)
    return struct.pack("=IHHII", 16 + len(body), nflog.NFNL_SUBSYS_ULOG << 8, 0, 0, 0) + body


def ipv4(protocol: int, destination: str, port: int, options: int = 0) -> bytes:
    header = bytes([0x45 + options, 0]) + b"\0" * 7 + bytes([protocol]) + b"\0" * 6 + socket.inet_aton(destination)
    return header + b"\0" * (4 * options) + struct.pack("!HH", 40000, port)


def test_nflog_messages_parse_to_their_prefix_protocol_address_and_port() -> None:
    data = packet_message(b"12 refused", ipv4(6, "10.250.0.2", 443)) + packet_message(
        b"3 allowed", ipv4(17, "9.9.9.9", 53, options=2)) + packet_message(b"4 allowed", ipv4(1, "1.1.1.1", 0))
    parsed = [nflog.parse_packet(body) for kind, body in nflog.messages(data)]
    assert parsed == [nflog.LoggedPacket("12 refused", "tcp", "10.250.0.2", 443),
                      nflog.LoggedPacket("3 allowed", "udp", "9.9.9.9", 53),
                      nflog.LoggedPacket("4 allowed", "icmp", "1.1.1.1", None)]
    assert nflog.parse_packet(packet_message(b"1 allowed", b"\x60" + b"\0" * 39)[16:]) is None  # IPv6: not ours
    assert list(nflog.messages(data[:-3])) == list(nflog.messages(data))[:2]  # a cut message is ignored


def test_another_firewall_dropping_forwarded_packets_is_named() -> None:
    listing = """table ip filter {
\tchain FORWARD {
\t\ttype filter hook forward priority filter; policy drop;
\t}
\tchain INPUT {
\t\ttype filter hook input priority filter; policy drop;
\t}
}
table inet sdnet_1_0 {
\tchain forward {
\t\ttype filter hook forward priority filter - 5; policy drop;
\t}
}
table inet other {
\tchain fwd {
\t\ttype filter hook forward priority filter; policy accept;
\t}
}
"""
    (warning,) = dropping_forward_chains(listing, "sdnet_1_0")
    assert "'FORWARD' of table 'ip filter' drops by default" in warning and "DOCKER-USER -i sdn+" in warning
