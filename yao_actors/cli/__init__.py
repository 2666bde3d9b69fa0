"""The ``yao-actors`` command's entry point, :func:`main` (the commands are :mod:`yao_actors.cli.commands`).

An interrupt (Ctrl-C, SIGINT) ends any command without a traceback, at any moment. Until :func:`main` runs, nothing
but the standard library is imported (the package's ``__init__`` imports lazily), so the second or more the commands
take to import is covered too; ``serve`` takes the signal itself once it runs (a graceful shutdown), and after the
command returned, an interrupt while the interpreter finishes ends it at once, quietly.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from contextlib import suppress
from types import FrameType

#: The exit code of a command that was interrupted (128 + SIGINT, as shells report it).
INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``argv``, default ``sys.argv[1:]``); returns the exit code, 130 if interrupted.

    With ``argv`` ``None`` the process is the command: an interrupt after the command returned ends it at once.
    """
    try:
        from yao_actors.cli.commands import run_command  # imported once interrupts are handled

        return run_command(argv)
    except BaseException as error:
        if not interrupted(error):
            raise
        return INTERRUPTED
    finally:
        if argv is None:
            _exit_at_once_when_interrupted()


def interrupted(error: BaseException) -> bool:
    """Whether ``error`` is an interrupt (possibly grouped by a nursery, with what it cut short)."""
    if isinstance(error, BaseExceptionGroup):
        return error.split(KeyboardInterrupt)[0] is not None
    return isinstance(error, KeyboardInterrupt)


def _exit_at_once_when_interrupted() -> None:
    """From now until the process ends (the interpreter finishing: flushing, joining threads, ``atexit``), an
    interrupt exits at once with :data:`INTERRUPTED`, instead of a ``KeyboardInterrupt`` traceback ignored there."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # a closed pipe, a closed stream: nothing more to say there
            stream.flush()
    signal.signal(signal.SIGINT, _exit_now)


def _exit_now(signum: int, frame: FrameType | None) -> None:
    os._exit(INTERRUPTED)
