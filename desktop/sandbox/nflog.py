"""The kernel's NFLOG messages, read in the server: what nftables `log group N` rules report.

Every desktop's nftables rules log its new connections, allowed and refused, to one NFLOG group per
server (docs/sandbox-network.md, "The log"); the kernel copies the first bytes of each logged packet and
the rule's prefix to the one netlink socket bound to that group. This module binds that socket (binding a group
another socket holds fails, so trying groups in turn picks a free one, atomically), configures the
copy, and parses the messages: a netlink header, `nfgenmsg`, then attributes, of which the prefix and
the payload (an IPv4 header and the transport ports) are all a connection record needs. No library:
the format is a few structs (linux/netfilter/nfnetlink_log.h), and the socket is read with asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

NETLINK_NETFILTER = 12
NFNL_SUBSYS_ULOG = 4
NFULNL_MSG_PACKET, NFULNL_MSG_CONFIG = 0, 1
NFULA_CFG_CMD, NFULA_CFG_MODE, NFULA_CFG_TIMEOUT, NFULA_CFG_QTHRESH = 1, 2, 4, 5
NFULNL_CFG_CMD_BIND = 1
NFULNL_COPY_PACKET = 2
NFULA_PAYLOAD, NFULA_PREFIX = 9, 10
NLMSG_ERROR, NLM_F_REQUEST, NLM_F_ACK = 2, 1, 4
NLA_TYPE_MASK = 0x3FFF  # without NLA_F_NESTED and NLA_F_NET_BYTEORDER

COPY_RANGE = 64
"""Bytes of each packet copied: an IPv4 header with options (up to 60) and the ports that follow it."""
FLUSH_CENTISECONDS = 5
"""The kernel batches messages for up to this long (50 ms) or QUEUE_THRESHOLD packets, whichever first."""
QUEUE_THRESHOLD = 16
RECEIVE_BUFFER = 1 << 20
"""A burst the reader has not caught up with waits here; past it the kernel drops (ENOBUFS, counted)."""

PROTOCOLS = {1: "icmp", 6: "tcp", 17: "udp", 58: "icmpv6", 132: "sctp"}


@dataclass(frozen=True)
class LoggedPacket:
    """One logged packet: its rule's prefix and what its IPv4 header says."""

    prefix: str
    protocol: str
    address: str
    """The destination address."""
    port: int | None
    """The destination port (TCP, UDP, SCTP); None for other protocols."""


def _attribute(kind: int, payload: bytes) -> bytes:
    header = struct.pack("=HH", 4 + len(payload), kind)
    return header + payload + b"\0" * (-len(payload) % 4)


def config_message(group: int, attributes: bytes, seq: int) -> bytes:
    """An NFULNL_MSG_CONFIG request for `group`, asking for an acknowledgement."""
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(group)) + attributes
    kind = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG
    return struct.pack("=IHHII", 16 + len(body), kind, NLM_F_REQUEST | NLM_F_ACK, seq, 0) + body


def messages(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(type, body) of each netlink message in one datagram; a truncated tail is ignored."""
    offset = 0
    while offset + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, offset)
        if length < 16 or offset + length > len(data):
            return
        yield kind, data[offset + 16: offset + length]
        offset += (length + 3) & ~3


def attributes(body: bytes) -> dict[int, bytes]:
    """The netlink attributes after `nfgenmsg`'s 4 bytes, by type."""
    found: dict[int, bytes] = {}
    offset = 4
    while offset + 4 <= len(body):
        length, kind = struct.unpack_from("=HH", body, offset)
        if length < 4 or offset + length > len(body):
            break
        found[kind & NLA_TYPE_MASK] = body[offset + 4: offset + length]
        offset += (length + 3) & ~3
    return found


def parse_packet(body: bytes) -> LoggedPacket | None:
    """The prefix, protocol, destination address and port of one NFULNL_MSG_PACKET; None if not IPv4."""
    found = attributes(body)
    prefix = found.get(NFULA_PREFIX, b"").split(b"\0", 1)[0].decode(errors="replace")
    packet = found.get(NFULA_PAYLOAD, b"")
    if len(packet) < 20 or packet[0] >> 4 != 4:
        return None
    header_length = (packet[0] & 0x0F) * 4
    number = packet[9]
    address = socket.inet_ntoa(packet[16:20])
    port = None
    if number in (6, 17, 132) and len(packet) >= header_length + 4:
        port = struct.unpack_from("!H", packet, header_length + 2)[0]
    return LoggedPacket(prefix, PROTOCOLS.get(number, str(number)), address, port)


class NflogReader:
    """The netlink socket bound to one NFLOG group, read on the event loop; `on_packet` gets each packet."""

    def __init__(self, sock: socket.socket, group: int) -> None:
        self.sock = sock
        self.group = group
        self.dropped = 0
        """Bursts the kernel could not deliver because the socket's buffer was full (ENOBUFS)."""
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def bind(cls, first: int, tries: int = 64) -> NflogReader:
        """Bind the first free group from `first` on (groups wrap at 65535); OSError when none is free."""
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
            sock.bind((0, 0))
            sock.settimeout(2.0)
            for i in range(tries):
                group = (first + i) % 65536
                try:
                    _request(sock, group, _attribute(NFULA_CFG_CMD, struct.pack("=Bxxx", NFULNL_CFG_CMD_BIND)))
                except OSError as error:
                    # The kernel answers EPERM when another socket holds the group (EBUSY when this one does).
                    if error.errno in (errno.EPERM, errno.EBUSY):
                        continue
                    raise
                mode = struct.pack("!IBx", COPY_RANGE, NFULNL_COPY_PACKET)
                _request(sock, group, _attribute(NFULA_CFG_MODE, mode)
                         + _attribute(NFULA_CFG_TIMEOUT, struct.pack("!I", FLUSH_CENTISECONDS))
                         + _attribute(NFULA_CFG_QTHRESH, struct.pack("!I", QUEUE_THRESHOLD)))
                sock.setblocking(False)
                return cls(sock, group)
            raise OSError(errno.EBUSY, f"NFLOG groups {first}..{first + tries - 1} are all taken")
        except BaseException:
            sock.close()
            raise

    def start(self, on_packet: Callable[[LoggedPacket], None]) -> None:
        """Read on the running loop from now on."""
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.sock.fileno(), self._readable, on_packet)

    def _readable(self, on_packet: Callable[[LoggedPacket], None]) -> None:
        for _ in range(256):  # bounded: a flood must not starve the loop; the rest is read next time round
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                return
            except OSError as error:
                if error.errno == errno.ENOBUFS:
                    self.dropped += 1
                    continue
                raise
            for kind, body in messages(data):
                if kind == (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET:
                    packet = parse_packet(body)
                    if packet is not None:
                        on_packet(packet)

    def close(self) -> None:
        """Stop reading and close the socket; the kernel unbinds the group with it."""
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self.sock.fileno())
            self._loop = None
        self.sock.close()


def _request(sock: socket.socket, group: int, payload: bytes) -> None:
    """Send one config request and wait for its acknowledgement; raise the kernel's error as OSError."""
    sock.send(config_message(group, payload, seq=1))
    deadline = 8  # replies to read at most: an ack comes first, but a PACKET message may precede it
    for _ in range(deadline):
        for kind, body in messages(sock.recv(65536)):
            if kind == NLMSG_ERROR:
                code = -struct.unpack_from("=i", body)[0]
                if code:
                    raise OSError(code, f"NFLOG group {group}: {errno.errorcode.get(code, code)}")
                return
    raise OSError(errno.EPROTO, f"NFLOG group {group}: no acknowledgement")
