"""Each desktop's network (desktop/sandbox/network.py): what creating, updating and closing one costs, and the
connect latency through its NAT against the host's own.

    .venv/bin/python bench/sandbox_network.py [--count 20]      (as root, with `ip` and `nft`)

1. `NetworkHub.open` (the claim, the leftover scan, the table, the NFLOG socket).
2. `create` with a warm pool (the hub's usual case: one nftables transaction through libnftables) and with
   no pool (`pool_size=0`: the slot is made on the spot, two `ip` runs more), each of egress `all` and an
   allowlist; `update` (a transaction replacing the desktop's chain and sets).
3. `close` (link down, namespace unnamed, rules removed: what a desktop's deletion waits for) and the time
   until its link is gone too (the kernel destroys it once the namespace goes).
4. TCP connect to a "remote" namespace (tests/support/netns.py `remote_host`, 10.250.x.x): from a desktop (its link,
   the host's forward chain, the masquerade) and from the host itself, medians of many connects.
5. Kernel memory per desktop network (slab and per-CPU, 50 made; other work on the machine adds noise).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import summary
from desktop.sandbox.network import NetworkHub, NetworkRules
from tests.support.netns import missing_tools, remote_host

PORT = 47121
CONNECTS = 300

LATENCY = r"""
import json, socket, sys, time
host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = []
for _ in range(count):
    s = socket.socket()
    start = time.perf_counter()
    s.connect((host, port))
    out.append(time.perf_counter() - start)
    s.close()
print(json.dumps(out))
"""


def connects(prefix: list[str], host: str) -> list[float]:
    done = subprocess.run([*prefix, sys.executable, "-I", "-S", "-c", LATENCY, host, str(PORT), str(CONNECTS)],
                          capture_output=True, text=True, timeout=120, check=True)
    return list(json.loads(done.stdout))


async def timed(coroutine: object) -> float:
    start = time.perf_counter()
    await coroutine  # type: ignore[misc]
    return time.perf_counter() - start


async def wait_pool(hub: NetworkHub) -> None:
    deadline = time.monotonic() + 10
    while hub._slots.ready < hub.pool_size and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


async def wait_gone(hub: NetworkHub) -> float:
    start = time.perf_counter()
    deadline = time.monotonic() + 10
    while not hub._slots.settled and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    return time.perf_counter() - start


async def main(count: int, remote_address: str) -> None:
    opened = []
    for _ in range(3):
        start = time.perf_counter()
        hub = await NetworkHub.open([2468], resolvers=[])
        opened.append(time.perf_counter() - start)
        await hub.close()
    summary("NetworkHub.open", opened)

    allowlist = NetworkRules.parse("allowlist", [f"{remote_address}:{PORT}", "10.0.0.0/8:443", "192.0.2.0/24"])
    for pool_size, label in ((2, "warm pool"), (0, "no pool")):
        hub = await NetworkHub.open([2468], resolvers=[], pool_size=pool_size)
        try:
            for rules, kind in ((NetworkRules(), "all"), (allowlist, "allowlist")):
                creates, closes, swept = [], [], []
                for i in range(count):
                    await wait_pool(hub)
                    start = time.perf_counter()
                    network = await hub.create(f"bench-{i}", rules)
                    creates.append(time.perf_counter() - start)
                    closes.append(await timed(network.close()))
                    swept.append(closes[-1] + await wait_gone(hub))
                summary(f"create, egress {kind}, {label}", creates)
                if pool_size:
                    summary(f"close, egress {kind} (what a deletion waits for)", closes)
                    summary(f"close until its link is gone too ({kind})", swept)
            if pool_size:
                await wait_pool(hub)
                network = await hub.create("bench-update", NetworkRules())
                updates = [await timed(network.update(allowlist if i % 2 else NetworkRules())) for i in range(count)]
                summary("update (all <-> allowlist)", updates)
                through = connects(["nsenter", f"--net={network.netns_path}"], remote_address)
                await network.close()
                direct = connects([], remote_address)
                base = summary("TCP connect from the host itself", direct)
                summary("TCP connect from a desktop (its link, forward, NAT)", through, base, "the host's")
        finally:
            await hub.close()


def kernel_kib() -> int:
    """The kernel's slab and per-CPU memory, KiB: where namespaces, links and rules live."""
    fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    return sum(int(fields[name].split()[0]) for name in ("Slab", "Percpu"))


async def memory(count: int = 50) -> None:
    hub = await NetworkHub.open([2468], resolvers=[], pool_size=0)
    try:
        before = kernel_kib()
        networks = [await hub.create(f"mem-{i}", NetworkRules()) for i in range(count)]
        grown = kernel_kib() - before
        print(f"kernel memory (Slab + Percpu) per desktop network, {count} made: {grown / count / 1024:.2f} MiB")
        for network in networks:
            await network.close()
    finally:
        await hub.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20)
    args = parser.parse_args()
    if reason := missing_tools():
        sys.exit(f"cannot run: {reason}")
    print(f"kernel {os.uname().release}, {os.cpu_count()} cores; medians of {args.count} "
          f"(connects: {CONNECTS})")
    with remote_host((PORT,)) as remote:
        asyncio.run(main(args.count, remote.address))
    asyncio.run(memory())
