"""nftables scripts run in the server's process through libnftables (the library `nft` itself is built on).

Starting `nft` costs ~4 ms of process start and library load before it does anything, more on a busy machine,
and a desktop's creation is one nftables transaction: through the library the same script costs what the
kernel takes (bench/sandbox_network.py). The library comes with the `nft` command (Debian: libnftables1,
a dependency of nftables); where it cannot be loaded, `nethost.nft` runs the command instead.

The calls block (a removal waits for the kernel's RCU grace period), so they run on a worker thread; one
context is shared under a lock, as the library's contexts are not thread-safe.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading


class NftError(RuntimeError):
    """The library refused a script; the message is what `nft` would have printed."""


FD_SETSIZE = 1024
MARGIN = 64
"""Descriptors other threads may open between the check and the context's socket."""


def _refuse_high_descriptors() -> None:
    """The context opens its netlink socket at the lowest free number, for good, and the library waits on it
    with select() (libnftables 1.0's mnl_batch_talk): at 1024 or above, glibc aborts the whole server ("bit
    out of range 0 - FD_SETSIZE on fd_set"). Where no low number is free, `nethost.nft` runs the command."""
    probe = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    os.close(probe)
    if probe >= FD_SETSIZE - MARGIN:
        raise OSError(f"libnftables: the lowest free descriptor is {probe}; its select() needs one below "
                      f"{FD_SETSIZE}")


class LibNft:
    """One libnftables context: `run(script)` applies a script as one transaction, as `nft -f` does."""

    def __init__(self) -> None:
        name = ctypes.util.find_library("nftables") or "libnftables.so.1"
        lib = ctypes.CDLL(name, use_errno=True)
        lib.nft_ctx_new.restype = ctypes.c_void_p
        lib.nft_ctx_new.argtypes = [ctypes.c_uint32]
        for function in (lib.nft_ctx_buffer_output, lib.nft_ctx_buffer_error):
            function.restype = ctypes.c_int
            function.argtypes = [ctypes.c_void_p]
        lib.nft_run_cmd_from_buffer.restype = ctypes.c_int
        lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        for function in (lib.nft_ctx_get_output_buffer, lib.nft_ctx_get_error_buffer):
            function.restype = ctypes.c_char_p
            function.argtypes = [ctypes.c_void_p]
        lib.nft_ctx_free.restype = None
        lib.nft_ctx_free.argtypes = [ctypes.c_void_p]
        self._lib = lib
        _refuse_high_descriptors()
        self._ctx = lib.nft_ctx_new(0)  # NFT_CTX_DEFAULT
        if not self._ctx:
            raise OSError("libnftables: nft_ctx_new failed")
        if lib.nft_ctx_buffer_output(self._ctx) or lib.nft_ctx_buffer_error(self._ctx):
            raise OSError("libnftables: cannot buffer its output")
        self._lock = threading.Lock()

    def run(self, script: str) -> str:
        """Apply `script`; its output (for `list`), or NftError with the library's error text."""
        with self._lock:
            status = self._lib.nft_run_cmd_from_buffer(self._ctx, script.encode())
            out = (self._lib.nft_ctx_get_output_buffer(self._ctx) or b"").decode(errors="replace")
            err = (self._lib.nft_ctx_get_error_buffer(self._ctx) or b"").decode(errors="replace")
        if status != 0:
            raise NftError(err.strip() or f"libnftables returned {status}")
        return out

    def close(self) -> None:
        with self._lock:
            if self._ctx:
                self._lib.nft_ctx_free(self._ctx)
                self._ctx = None


_shared: LibNft | None = None
_shared_lock = threading.Lock()


def shared() -> LibNft | None:
    """The process's context, made on first use; None where the library cannot be loaded."""
    global _shared
    with _shared_lock:
        if _shared is None:
            try:
                _shared = LibNft()
            except (OSError, AttributeError):
                return None
        return _shared
