"""Real ``server.py`` processes for the integration tests: start one, read its banner, leave nothing behind; stop
one between a run's interrupt and its resume."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import trio

from tests.service.support import run_frame, send, until_terminal
from yao_actors.cli.chat import open_service_connection
from yao_actors.testing import read_line
from yao_actors.transports import stop_process

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


@asynccontextmanager
async def listening_process(command: list[str]) -> AsyncIterator[tuple[str, trio.Process]]:
    """Run ``command`` (a server that prints ``LISTENING <url>`` once bound) in its own session; yield the URL and
    the process once it listens, and stop it on exit, even when the test is cancelled."""
    process = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert process.stdout is not None
        word, url = (await read_line(process.stdout)).split()
        assert word == "LISTENING"
        yield url, process
    finally:
        with trio.CancelScope(shield=True):
            await stop_process(process)


async def end_process(process: trio.Process, sig: signal.Signals | None) -> None:
    """End ``process`` if it still runs: ``sig`` and up to 30 s to exit, then SIGKILL (at once without ``sig``)."""
    if process.returncode is None and sig is not None:
        process.send_signal(sig)
        with trio.move_on_after(30):
            await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()


def write_config(tmp_path: Path, base_url: str, servers: dict[str, Any], store: dict[str, Any] | None = None) -> Path:
    """``tmp_path/config.json`` for ``server.py --config``: the MCP ``servers``, all of them the default
    assistant's, whose model is the fake OpenAI-compatible endpoint at ``base_url``; ``store`` (by default SQLite
    in ``tmp_path``, which outlives a restart). Returns its path."""
    config = {
        "mcpServers": servers,
        "models": {"fake": {"provider": "openai", "base_url": base_url, "model": "fake", "api_key_env": None}},
        "assistants": {"default": {"model": "fake", "mcp": {"servers": list(servers)}}},
        "store": store or {"type": "sqlite", "path": str(tmp_path / "conversations.sqlite3")},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


@asynccontextmanager
async def service_process(config: Path) -> AsyncIterator[tuple[trio.Process, str]]:
    """``server.py --config`` on a free port; yields the process and its websocket URL. Whatever the test did to
    it, nothing of it is left running at the end (its MCP server child included)."""
    async with server_py("--config", str(config), "--port", "0") as (process, banner):
        match = re.search(r"ws://127\.0\.0\.1:\d+/", banner)
        assert match, banner
        yield process, match.group()


async def stop(process: trio.Process) -> int:
    """SIGTERM, and the exit code."""
    process.send_signal(signal.SIGTERM)
    return await process.wait()


Events = list[dict[str, Any]]


async def interrupted_across_a_restart(
    config: Path,
    question: str,
    interrupt_of: Callable[[Events], dict[str, Any]],
    payload: dict[str, Any],
    *,
    kill_9: bool = False,
) -> tuple[Events, Events]:
    """A run's interrupt resolved by a service started again on the same store (``config``'s: one that lasts).

    Over the websocket of ``server.py --config CONFIG``: ``question`` as run ``r1`` on thread ``t1``, which
    ends on an interrupt; the service is stopped (SIGTERM, exiting 0; or ``kill -9``: nothing of it gets to
    run) and started again; run ``r2`` resolves ``interrupt_of(r1's events)`` with ``payload``, and ``r3``
    sends the same resume again. Returns the events of ``r2`` and ``r3`` (``interrupt_of`` checks ``r1``'s).
    """
    async with service_process(config) as (process, url):
        async with open_service_connection(url) as ws:
            await send(ws, run_frame(question, run_id="r1", thread_id="t1"))
            first = await until_terminal(ws, "r1")
        if kill_9:
            process.kill()
            await process.wait()
        else:
            assert await stop(process) == 0
    resume = [{"interruptId": interrupt_of(first)["id"], "status": "resolved", "payload": payload}]
    async with service_process(config) as (process, url):
        async with open_service_connection(url) as ws:
            await send(ws, {"type": "run", "runId": "r2", "threadId": "t1", "messages": [], "resume": resume})
            second = await until_terminal(ws, "r2")
            await send(ws, {"type": "run", "runId": "r3", "threadId": "t1", "messages": [], "resume": resume})
            stale = await until_terminal(ws, "r3")
        assert await stop(process) == 0
    return second, stale
