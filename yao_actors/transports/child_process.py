"""A stdio server's process: reporting its exit, and stopping it for sure.

The child runs in its own process group. Its exit marks the link lost with the exit code, once its last stderr
lines are read (or :data:`STDERR_FLUSH_WAIT` passed); stopping it closes stdin, waits a little, then SIGTERMs and
SIGKILLs the group — every wait bounded, so a cancelled caller never leaves an orphan.
"""

from __future__ import annotations

import os
import signal
from contextlib import suppress

import trio

from yao_actors.transports.link import Link

#: Seconds a stdio server gets to exit after its stdin closes (SDK servers take seconds: do not wait for them).
STDIN_GRACE = 0.2
#: Seconds a stdio server gets to exit after SIGTERM, before SIGKILL.
TERM_GRACE = 1.0
#: Seconds the exit report waits for the last stderr lines of a dead server.
STDERR_FLUSH_WAIT = 0.5


async def watch_exit(process: trio.Process, link: Link, stderr_done: trio.Event) -> None:
    """Report the child's death, with its exit code and its last stderr lines."""
    await report_exit(await process.wait(), link, stderr_done)


async def report_exit(code: int, link: Link, stderr_done: trio.Event) -> None:
    """Mark ``link`` lost by the child's exit with ``code``, once its last stderr lines are read."""
    with trio.move_on_after(STDERR_FLUSH_WAIT):
        await stderr_done.wait()
    link.mark_lost("the server process exited", exit_code=code)


def _signal_group(process: trio.Process, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


async def stop_process(process: trio.Process) -> None:
    """Stop a stdio server for sure: close stdin, then SIGTERM, then SIGKILL its process group.

    Every wait is bounded (``STDIN_GRACE``, ``TERM_GRACE``); call it shielded.
    Idempotent. Whatever is left of the child's process group afterwards is
    killed too.
    """
    if process.stdin is not None:
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await process.stdin.aclose()
    for sig, grace in ((None, STDIN_GRACE), (signal.SIGTERM, TERM_GRACE), (signal.SIGKILL, TERM_GRACE)):
        if process.returncode is not None:
            break
        if sig is not None:
            _signal_group(process, sig)
        with trio.move_on_after(grace):
            await process.wait()
    _signal_group(process, signal.SIGKILL)
