"""libnftables waits on its netlink socket with select(), and glibc aborts the process on a socket past 1023:
desktop/sandbox/libnft.py makes no context where no low descriptor is free (`nethost.nft` then runs `nft`)."""

from __future__ import annotations

import ctypes.util
import resource
import subprocess
import sys

import pytest

from tests.conftest import OCCUPY, REPO

pytestmark = pytest.mark.skipif(ctypes.util.find_library("nftables") is None, reason="needs libnftables")

CHECK = "from desktop.sandbox import libnft; print(libnft.shared() is not None)"


def test_no_context_when_every_low_descriptor_is_taken() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 1200:
        if hard != resource.RLIM_INFINITY and hard < 1200:
            pytest.skip("needs a descriptor limit above 1200")
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the child starts with it
    # A fresh process (the launcher takes descriptors 3-1100, then execs it): this one's may be in use.
    high = subprocess.run([sys.executable, "-c", OCCUPY, "1100", sys.executable, "-c", CHECK], cwd=REPO,
                          capture_output=True, text=True, timeout=30)
    assert high.returncode == 0, high.stderr
    assert high.stdout.strip() == "False"
    low = subprocess.run([sys.executable, "-c", CHECK], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert low.stdout.strip() == "True", low.stderr
