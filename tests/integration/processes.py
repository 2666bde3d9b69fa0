"""Real ``server.py`` processes for the integration tests: start one, read its banner, leave nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import trio

from yao_actors.testing import read_line

REPO = Path(__file__).resolve().parents[2]


def descendants(pid: int) -> set[int]:
    """Every process below ``pid``, from ``/proc``."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` is still a running process (an exited, unreaped one does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without the variables that would change what ``server.py`` does, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "YAO_ACTORS_"))}
    env.update(extra)
    return env


@asynccontextmanager
async def server_py(
    *args: str,
    env: Mapping[str, str] | None = None,
    stderr: IO[Any] | None = None,
    graceful: bool = False,
) -> AsyncIterator[tuple[trio.Process, str]]:
    """``python server.py ARGS`` in the repository; yields the process and its banner line once it serves.

    Whatever the test did to it, nothing of it is left running at the end, its MCP servers and workers included
    (those seen at the start and at the end): a ``graceful`` exit sends SIGTERM and waits up to 30 s before
    SIGKILL; otherwise the process is killed at once.
    """
    process = await trio.lowlevel.open_process(
        [sys.executable, "server.py", *args],
        cwd=REPO,
        env=dict(env) if env is not None else clean_environment(),
        stdout=subprocess.PIPE,
        stderr=stderr,
    )
    seen: set[int] = set()
    try:
        assert process.stdout is not None
        banner = await read_line(process.stdout)
        seen = descendants(process.pid)
        yield process, banner
    finally:
        seen |= descendants(process.pid)
        await end_process(process, signal.SIGTERM if graceful else None)
        for pid in seen:
            if running(pid):
                os.kill(pid, signal.SIGKILL)


async def end_process(process: trio.Process, sig: signal.Signals | None) -> None:
    """End ``process`` if it still runs: ``sig`` and up to 30 s to exit, then SIGKILL (at once without ``sig``)."""
    if process.returncode is None and sig is not None:
        process.send_signal(sig)
        with trio.move_on_after(30):
            await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()
