"""A rootless desktop's rules against the host's addresses (desktop/sandbox/slirp.py), each check in a network
namespace of its own (`unshare --net`, as root): the rules replace those before them in one transaction, and a
change of the namespace's addresses reaches every desktop that follows them within a moment. The whole path
through a real rootless server and slirp4netns: tests/api/security/test_rootless_network.py."""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import subprocess
import sys

import pytest

from desktop.sandbox.slirp import POLL_S
from tests.conftest import REPO

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None,
                                reason="needs root, unshare and ip (a network namespace of the test's own)")


def in_own_netns(code: str) -> str:
    """Run `code` in a fresh network namespace (only its loopback); what it printed."""
    done = subprocess.run(["unshare", "--net", sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(ctypes.util.find_library("nftables") is None, reason="needs libnftables")
def test_the_rules_replace_those_before_them() -> None:
    listed = in_own_netns("""
from desktop.sandbox import libnft
from desktop.sandbox.init import apply_firewall
from desktop.sandbox.slirp import firewall
apply_firewall(firewall(["10.77.0.1", "fd77::1"]))
apply_firewall(firewall(["10.77.0.2"]))
print(libnft.shared().run("list ruleset"))
""")
    assert listed.count("table inet sandbox_desktop") == 1, listed
    assert "10.77.0.2" in listed and "10.0.2.2" in listed, listed  # the new address and slirp4netns's gateway
    assert "10.77.0.1" not in listed and "fd77::1" not in listed, listed  # the old ones are gone


@pytest.mark.parametrize("told_by", ["netlink", "poll"])
def test_a_change_of_the_hosts_addresses_reaches_each_desktop_that_follows_them(told_by: str) -> None:
    """Told by the kernel (netlink), or, where its socket cannot be had, by reading the addresses every POLL_S."""
    # A desktop that refuses what it is told, in a namespace whose addresses the test changes (`ip addr`).
    found = json.loads(in_own_netns("""
import asyncio, json, subprocess, time
from desktop.sandbox import slirp
from desktop.sandbox.slirp import HostAddresses, host_addresses
if TOLD_BY == "poll":
    slirp._address_changes = lambda: None  # as where the socket cannot be opened

class Desktop:
    def __init__(self):
        self.refused = host_addresses()
        self.told = asyncio.Queue()
    async def refuse_host(self, addresses):
        self.refused = addresses
        self.told.put_nowait((time.monotonic(), addresses))

async def main():
    watch, desktops = HostAddresses(), [Desktop(), Desktop()]
    for desktop in desktops:
        watch.follow(desktop)
    await asyncio.sleep(0.3)
    quiet = [desktop.told.qsize() for desktop in desktops]  # nothing changed yet: nothing to tell
    subprocess.run(["ip", "addr", "add", "10.77.0.9/32", "dev", "lo"], check=True)
    added = time.monotonic()
    told = [await asyncio.wait_for(desktop.told.get(), 5) for desktop in desktops]
    await watch.unfollow(desktops[0])
    subprocess.run(["ip", "addr", "del", "10.77.0.9/32", "dev", "lo"], check=True)
    removed = await asyncio.wait_for(desktops[1].told.get(), 5)
    await asyncio.sleep(0.3)
    await watch.close()
    print(json.dumps({"quiet": quiet, "told": [addresses for _, addresses in told],
                      "after_ms": max(at - added for at, _ in told) * 1000, "removed": removed[1],
                      "unfollowed": desktops[0].told.qsize()}))

asyncio.run(main())
""".replace("TOLD_BY", repr(told_by))))
    assert found["quiet"] == [0, 0], found
    assert all("10.77.0.9" in addresses for addresses in found["told"]), found
    # The kernel tells at once; a poll within its period (and the settling after either).
    assert found["after_ms"] < (1000 if told_by == "netlink" else (POLL_S + 1) * 1000), found
    assert "10.77.0.9" not in found["removed"], found
    assert found["unfollowed"] == 0, found  # a desktop no longer followed is told nothing
