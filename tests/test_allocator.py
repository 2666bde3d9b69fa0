"""``yao-actors serve`` has glibc give freed large blocks back (issue 29 defect 3: glibc kept the megabytes of runs
nothing held any more)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from yao_actors.service.allocator import LARGE_BLOCK, _glibc

pytestmark = pytest.mark.skipif(_glibc() is None, reason="glibc's allocator only")

#: In a fresh process: free a 4 MiB block (glibc then raises its threshold to 4 MiB), maybe call
#: return_large_blocks, and tell whether a new 1 MiB block is mapped on its own (and so unmapped when freed).
PROBE = textwrap.dedent(
    """
    import ctypes, sys
    from yao_actors.service.allocator import return_large_blocks

    class Info(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = Info
    freed = bytearray(4 << 20)
    del freed
    applied = return_large_blocks() if sys.argv[1] == "call" else None
    before = libc.mallinfo2().hblkhd
    block = bytearray(1 << 20)
    print(applied, libc.mallinfo2().hblkhd - before >= 1 << 20)
    """
)


def probe(call: bool, **env: str) -> str:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")} | env
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "call" if call else "leave"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_a_large_block_is_mapped_on_its_own_again() -> None:
    assert probe(call=False) == "None False"  # glibc alone: from its heap, where freed memory stays
    assert probe(call=True) == "True True"


def test_the_environment_wins() -> None:
    """Any of glibc's threshold variables stops the threshold's rise already: the call leaves them alone."""
    assert probe(call=True, MALLOC_TOP_PAD_=str(LARGE_BLOCK)) == "False True"
    assert probe(call=True, MALLOC_MMAP_THRESHOLD_=str(LARGE_BLOCK)) == "False True"
