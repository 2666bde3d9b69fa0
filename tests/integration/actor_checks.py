"""Behaviour every server actor must show, whatever its transport (in-memory, stdio, HTTP).

Each check takes a handle connected to ``yao_actors.testing.servers`` and
asserts one behaviour; the transport test modules run them all.
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import trio

from yao_actors.config import ServerSpec
from yao_actors.errors import ErrorKind
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.server_actor import ServerHandle, ServerState, serve_mcp_server
from yao_actors.transports import Connector, open_client

#: ``ServerSpec.protocol`` values, each with the version the test server then speaks.
PROTOCOLS = [("legacy", "2025-11-25"), ("auto", "2026-07-28"), ("2026-07-28", "2026-07-28")]

TEST_TOOLS = {"echo", "add", "sleep", "fail", "progress", "crash", "stats", "whoami", "register"}


@asynccontextmanager
async def running(spec: ServerSpec, *, connect: Connector = open_client) -> AsyncIterator[ServerHandle]:
    """Run one server actor for the block's duration (reaching its server through ``connect``)."""
    async with trio.open_nursery() as nursery:
        handle: ServerHandle = await nursery.start(functools.partial(serve_mcp_server, spec, connect=connect))
        yield handle
        nursery.cancel_scope.cancel()


def process_gone(pid: int) -> bool:
    """Whether no process (and no member of its process group) with ``pid`` is left."""
    for probe in (os.kill, os.killpg):
        try:
            probe(pid, 0)
        except ProcessLookupError:
            continue
        return False
    return True


async def stats(handle: ServerHandle) -> dict[str, object]:
    outcome = await handle.call_tool("stats", {})
    assert outcome.ok, outcome
    assert isinstance(outcome.result, dict)
    return outcome.result


async def executions(handle: ServerHandle, tool: str) -> int:
    """How many executions of ``tool`` the server has begun."""
    calls = (await stats(handle))["calls"]
    assert isinstance(calls, dict)
    return int(calls.get(tool, 0))


async def check_list_and_call(handle: ServerHandle) -> None:
    assert handle.state is ServerState.READY
    names = {tool.name for tool in await handle.list_tools()}
    assert names >= TEST_TOOLS
    outcome = await handle.call_tool("add", {"a": 2, "b": 3})
    assert outcome.ok
    assert outcome.result == {"sum": 5}
    assert outcome.duration > 0
    failed = await handle.call_tool("fail", {"message": "no such thing"})
    assert failed.kind is ErrorKind.TOOL_ERROR
    assert failed.error == "no such thing"
    caller = await handle.call_tool("whoami", {})
    assert caller.result["name"] == "yao-actors"


async def check_concurrent_calls(handle: ServerHandle, count: int = 24) -> None:
    results: dict[int, object] = {}

    async def one(i: int) -> None:
        outcome = await handle.call_tool("echo", {"text": f"call {i}"})
        assert outcome.ok, outcome
        results[i] = outcome.result

    async with trio.open_nursery() as nursery:
        for i in range(count):
            nursery.start_soon(one, i)
    assert results == {i: {"text": f"call {i}"} for i in range(count)}
    assert handle.statistics().in_flight == 0


async def check_progress(handle: ServerHandle) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    outcome = await handle.call_tool("progress", {"steps": 3}, progress=progress)
    assert outcome.result == {"steps": 3}
    assert seen == [(i, 3, f"step {i} of 3") for i in (1, 2, 3)]


async def wait_for_cancellations(handle: ServerHandle, count: int) -> None:
    """The server counts a cancelled execution once notifications/cancelled reached it."""
    with trio.fail_after(10):
        while (await stats(handle))["cancelled"] != count:  # noqa: ASYNC110 -- a counter in another process
            await trio.sleep(0.02)


async def check_deadline(handle: ServerHandle) -> None:
    """The handle's spec must have a short ``timeout`` (well under 30 s)."""
    outcome = await handle.call_tool("sleep", {"seconds": 30})
    assert outcome.kind is ErrorKind.TIMEOUT
    assert "timed out" in (outcome.error or "")
    await wait_for_cancellations(handle, 1)
    after = await handle.call_tool("add", {"a": 1, "b": 1})
    assert after.result == {"sum": 2}


async def check_caller_cancellation(handle: ServerHandle, already_cancelled: int = 0) -> None:
    sleeps = await executions(handle, "sleep")
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(handle.call_tool, "sleep", {"seconds": 30})
            # The server counts an execution as it starts it: the caller cancels once the call runs there (a
            # cancel before the request went out, or before the server began it, would leave nothing to cancel).
            while await executions(handle, "sleep") == sleeps:  # noqa: ASYNC110 -- a counter in another process
                await trio.sleep(0.01)
            scope.cancel()
    assert scope.cancelled_caught
    await wait_for_cancellations(handle, already_cancelled + 1)
    assert handle.statistics().in_flight == 0


async def fail_in_flight(
    handle: ServerHandle, count: int, cause: Callable[[], object], *, within: float
) -> list[ToolOutcome]:
    """Start ``count`` 50 s calls, ``cause`` a loss once they all run; they must all fail ``within`` seconds."""
    outcomes: list[ToolOutcome] = []

    async def call() -> None:
        outcomes.append(await handle.call_tool("sleep", {"seconds": 50}))

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(call)
        with trio.fail_after(10):
            while handle.statistics().in_flight < count:  # noqa: ASYNC110 -- counters, no event to wait on
                await trio.sleep(0.01)
        cause()
        with trio.fail_after(within):
            while len(outcomes) < count:  # noqa: ASYNC110
                await trio.sleep(0.01)
    assert [o.kind for o in outcomes] == [ErrorKind.SERVER_UNAVAILABLE] * count
    return outcomes


async def check_list_changed(handle: ServerHandle) -> None:
    """A tool added at run time reaches the catalog: ``tools/list_changed``, or a ``subscriptions/listen`` event."""
    version = handle.tools_version
    async with trio.open_nursery() as nursery:
        nursery.start_soon(handle.call_tool, "register", {"tool": "late"})
        with trio.fail_after(10):
            assert await handle.wait_catalog_change() == version + 1
    assert "late" in {tool.name for tool in await handle.list_tools()}
    assert (await handle.call_tool("late", {"text": "hi"})).result == {"text": "hi"}


async def check_all(handle: ServerHandle) -> None:
    """Every behaviour check in turn, on one server.

    Its spec's ``timeout`` is short (a few seconds: long enough that a loaded machine does not time out the
    quick calls, short against the 30 s sleep that must time out).
    """
    await check_list_and_call(handle)
    await check_concurrent_calls(handle)
    await check_progress(handle)
    await check_deadline(handle)
    await check_caller_cancellation(handle, already_cancelled=1)
    await check_list_changed(handle)
