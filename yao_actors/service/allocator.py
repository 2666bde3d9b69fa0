"""The service process's C allocator: a large block the service frees goes back to the system.

glibc's ``malloc`` serves a block of 128 KiB or more with its own ``mmap``, unmapped when freed; but the first time
such a block is freed it raises that threshold to the block's size (up to 32 MiB), and from then on serves blocks
that large from its heaps, where freed memory stays with the process, fragmented between what is still in use. A
run's megabyte-sized texts (a tool result, the events carrying it, the stored log) are such blocks: with the
threshold raised, a service doing 1 MB runs kept ~1 MB of RSS per run that nothing held any more
(``benchmarks/memory_growth.py``: +25 to +45 MiB over 50 runs once no Python object held them, none after
``malloc_trim``). :func:`return_large_blocks` sets the threshold to 128 KiB for good (``mallopt(M_MMAP_THRESHOLD)``,
which also stops its adjustment), as ``MALLOC_MMAP_THRESHOLD_=131072`` in the environment would: large blocks are
then always mapped and given back when freed, at the cost of a system call or two per block of 128 KiB or more.

Only a process that owns its allocator should do this: ``yao-actors serve`` calls it at start; an embedder may.
The environment wins: with ``MALLOC_MMAP_THRESHOLD_`` (or ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_TOP_PAD_``,
``MALLOC_MMAP_MAX_``, which stop the adjustment too) set, it changes nothing. Other C libraries are left as they are.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from typing import Final

logger = logging.getLogger(__name__)

LARGE_BLOCK: Final = 128 * 1024
"""Bytes from which a block is mapped on its own and unmapped when freed (glibc's initial threshold)."""

M_MMAP_THRESHOLD: Final = -3
"""``mallopt``'s parameter number for the threshold (glibc's ``malloc.h``)."""

#: glibc's variables that already fix what :func:`return_large_blocks` would.
_ENVIRONMENT: Final = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


def return_large_blocks(threshold: int = LARGE_BLOCK) -> bool:
    """Have glibc map every block of ``threshold`` bytes or more on its own, and unmap it when freed.

    Returns whether it did: not under another C library, nor when the environment sets the allocator's thresholds.
    """
    if any(name in os.environ for name in _ENVIRONMENT):
        return False
    libc = _glibc()
    if libc is None:
        return False
    done = bool(libc.mallopt(M_MMAP_THRESHOLD, threshold))
    logger.debug("glibc maps blocks of %d bytes and more on their own: %s", threshold, done)
    return done


def _glibc() -> ctypes.CDLL | None:
    """The process's glibc, or ``None`` under another C library (musl has no ``mallopt``; macOS no glibc)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        version = libc.gnu_get_libc_version  # only glibc has it
    except (OSError, AttributeError):
        return None
    version.restype = ctypes.c_char_p
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    libc.mallopt.restype = ctypes.c_int
    return libc
