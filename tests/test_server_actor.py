"""The server actor over in-memory servers: behaviour, limits, ownership of the client, supervision."""

from __future__ import annotations

import functools
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx2
import mcp
import mcp.types
import pytest
import trio
import trio.testing
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from tests.integration import actor_checks
from tests.integration.actor_checks import fail_in_flight, running
from yao_actors.config import InMemoryTransport, RestartPolicy, ServerSpec
from yao_actors.errors import ErrorKind
from yao_actors.testing.servers import build_test_server
from yao_actors.tools.server_actor import PROGRESS_BUFFER, ServerState, serve_mcp_server
from yao_actors.tools.tool_server import CallOptions
from yao_actors.transports import TRANSPORT_FAILURE, Link, ResilientTransport, open_client


def memory_spec(server: Any = None, **changes: Any) -> ServerSpec:
    return ServerSpec(id="mem", transport=InMemoryTransport(server or build_test_server()), **changes)


async def test_list_and_call() -> None:
    async with running(memory_spec()) as handle:
        await actor_checks.check_list_and_call(handle)


async def test_concurrent_calls() -> None:
    async with running(memory_spec()) as handle:
        await actor_checks.check_concurrent_calls(handle)


async def test_progress_is_forwarded() -> None:
    async with running(memory_spec()) as handle:
        await actor_checks.check_progress(handle)


async def test_deadline_cancels_the_call_and_keeps_the_session(autojump_clock: trio.abc.Clock) -> None:
    async with running(memory_spec(timeout=2.0)) as handle:
        await actor_checks.check_deadline(handle)


async def test_caller_cancellation_reaches_the_server(autojump_clock: trio.abc.Clock) -> None:
    async with running(memory_spec()) as handle:
        await actor_checks.check_caller_cancellation(handle)


async def test_unknown_tool_is_a_tool_error() -> None:
    async with running(memory_spec()) as handle:
        outcome = await handle.call_tool("no_such_tool", {})
    assert outcome.kind is ErrorKind.TOOL_ERROR
    assert outcome.retryable


@pytest.mark.parametrize(("own", "callers", "raises"), [(5, 2, True), (2, 5, False), (3, 3, False)])
async def test_a_callers_deadline_shares_the_calls_scope(
    autojump_clock: trio.abc.Clock, own: float, callers: float, raises: bool
) -> None:
    """``deadline=``: the earlier of the two ends the call; the caller's raises ``TooSlowError``, the call's own
    is its ``timeout`` outcome (also on a tie); either way the server is told to cancel."""
    async with running(memory_spec(timeout=own)) as handle:
        start = trio.current_time()
        if raises:
            with pytest.raises(trio.TooSlowError):
                await handle.call_tool("sleep", {"seconds": 60}, CallOptions(deadline=start + callers))
        else:
            outcome = await handle.call_tool("sleep", {"seconds": 60}, CallOptions(deadline=start + callers))
            assert outcome.kind is ErrorKind.TIMEOUT
            assert f"timed out after {own:g}s" in (outcome.error or "")
        assert trio.current_time() - start == pytest.approx(min(own, callers))
        await trio.testing.wait_all_tasks_blocked()
        assert handle.statistics().in_flight == 0  # the actor's side of the call was cancelled too
        assert (await handle.call_tool("echo", {"text": "next"})).result == {"text": "next"}


async def test_concurrency_is_capped_and_the_rest_queue(autojump_clock: trio.abc.Clock) -> None:
    peak = 0
    async with running(memory_spec(max_concurrency=3, queue_size=10)) as handle:
        async with trio.open_nursery() as nursery:
            for _ in range(8):
                nursery.start_soon(handle.call_tool, "sleep", {"seconds": 1})
            while handle.statistics().calls < 8:
                stats = handle.statistics()
                peak = max(peak, stats.in_flight)
                assert stats.in_flight + stats.queued <= 8
                await trio.sleep(0.1)
        assert peak == 3
        assert handle.statistics().errors == 0


async def test_queue_full_fails_fast(autojump_clock: trio.abc.Clock) -> None:
    outcomes: list[Any] = []
    async with running(memory_spec(max_concurrency=1, queue_size=1)) as handle:

        async def call() -> None:
            outcomes.append(await handle.call_tool("sleep", {"seconds": 5}))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            nursery.start_soon(call)
            await trio.sleep(1)
            start = trio.current_time()
            third = await handle.call_tool("sleep", {"seconds": 5})
            assert trio.current_time() == start  # answered at once: no virtual time passed
    assert third.kind is ErrorKind.SERVER_UNAVAILABLE
    assert "queue full" in (third.error or "")
    assert [o.result for o in outcomes] == [{"slept": 5}, {"slept": 5}]


async def test_slow_progress_consumer_never_blocks_the_call(autojump_clock: trio.abc.Clock) -> None:
    received = 0

    async def slow(value: float, total: float | None, message: str | None) -> None:
        nonlocal received
        received += 1
        await trio.sleep(1)

    async with running(memory_spec(timeout=1000)) as handle:
        outcome = await handle.call_tool("progress", {"steps": 200}, CallOptions(slow))
    assert outcome.result == {"steps": 200}
    # the server ran on while the caller slept; what the caller had no room for was dropped
    assert 1 <= received <= PROGRESS_BUFFER + 1


async def test_catalog_is_refreshed_on_list_changed() -> None:
    async with running(memory_spec()) as handle:
        await actor_checks.check_list_changed(handle)


def paging_server(pages: int, per_page: int) -> Server[Any]:
    """A low-level server that lists its tools over ``pages`` pages."""

    async def list_tools(ctx: Any, params: mcp.types.PaginatedRequestParams | None) -> mcp.types.ListToolsResult:
        page = int(params.cursor) if params and params.cursor else 0
        tools = [mcp.types.Tool(name=f"p{page}_{i}", input_schema={"type": "object"}) for i in range(per_page)]
        return mcp.types.ListToolsResult(tools=tools, next_cursor=str(page + 1) if page + 1 < pages else None)

    return Server("paging", on_list_tools=list_tools)


def failing_server(code: int) -> Server[Any]:
    """A low-level server whose one tool answers every call with the JSON-RPC error ``code``."""

    async def list_tools(ctx: Any, params: mcp.types.PaginatedRequestParams | None) -> mcp.types.ListToolsResult:
        return mcp.types.ListToolsResult(tools=[mcp.types.Tool(name="fail", input_schema={"type": "object"})])

    async def call_tool(ctx: Any, params: mcp.types.CallToolRequestParams) -> mcp.types.CallToolResult:
        raise MCPError(code=code, message="the database is on fire")

    return Server("failing", on_list_tools=list_tools, on_call_tool=call_tool)


@pytest.mark.parametrize("code", [mcp.types.INTERNAL_ERROR, mcp.types.METHOD_NOT_FOUND, mcp.types.INVALID_PARAMS, 42])
async def test_an_answered_json_rpc_error_is_a_tool_error(code: int) -> None:
    async with running(memory_spec(failing_server(code))) as handle:
        outcomes = [await handle.call_tool("fail", {}) for _ in range(2)]
        stats = handle.statistics()
    for outcome in outcomes:
        assert outcome.kind is ErrorKind.TOOL_ERROR
        assert outcome.error == f"the database is on fire (JSON-RPC error {code})"
    assert (stats.state, stats.restarts, stats.last_error) == (ServerState.READY, 0, None)


async def test_a_request_the_network_failed_is_server_unavailable() -> None:
    async with running(memory_spec(failing_server(TRANSPORT_FAILURE))) as handle:
        outcome = await handle.call_tool("fail", {})
    assert outcome.kind is ErrorKind.SERVER_UNAVAILABLE
    assert "the database is on fire" in (outcome.error or "")


async def test_the_resilient_transport_answers_a_network_error_with_a_transport_failure() -> None:
    def broken(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadError("connection reset", request=request)

    link = Link()
    transport = ResilientTransport(httpx2.MockTransport(broken), link)
    response = await transport.handle_async_request(httpx2.Request("POST", "http://127.0.0.1:1/mcp"))
    assert response.status_code == 503
    answer = mcp.types.jsonrpc_message_adapter.validate_json(response.content, by_name=False)
    assert isinstance(answer, mcp.types.JSONRPCError)
    assert (answer.error.code, answer.error.message) == (TRANSPORT_FAILURE, "ReadError: connection reset")
    assert not link.lost.is_set()  # one request failed, not the connection


async def test_extra_trivial_tools_for_catalog_caps() -> None:
    async with running(memory_spec(build_test_server(extra_tools=30))) as handle:
        names = [tool.name for tool in await handle.list_tools()]
        assert (await handle.call_tool("t29", {})).result == {"tool": 29}
    assert names[-30:] == [f"t{i}" for i in range(30)]


async def test_catalog_reads_every_page() -> None:
    async with running(memory_spec(paging_server(pages=3, per_page=4))) as handle:
        names = [tool.name for tool in await handle.list_tools()]
    assert names == [f"p{page}_{i}" for page in range(3) for i in range(4)]


async def test_only_the_actor_task_enters_and_exits_the_client() -> None:
    entered: list[trio.lowlevel.Task] = []
    exited: list[trio.lowlevel.Task] = []
    callers: list[trio.lowlevel.Task] = []

    class Recording:
        """The client, or its session (a 2026-07-28 call goes through ``client.session.call_tool``)."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def call_tool(self, *args: Any, **kwargs: Any) -> Any:
            callers.append(trio.lowlevel.current_task())
            return await self.inner.call_tool(*args, **kwargs)

        @property
        def session(self) -> Any:
            return Recording(self.inner.session)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    @asynccontextmanager
    async def recording(spec: ServerSpec, *, link: Link, **kwargs: Any) -> AsyncIterator[Any]:
        entered.append(trio.lowlevel.current_task())
        try:
            async with open_client(spec, link=link, **kwargs) as client:
                yield Recording(client)
        finally:
            exited.append(trio.lowlevel.current_task())

    async with trio.open_nursery() as nursery:
        handle = await nursery.start(functools.partial(serve_mcp_server, memory_spec(), connect=recording))
        (actor,) = nursery.child_tasks
        await actor_checks.check_concurrent_calls(handle, count=5)
        nursery.cancel_scope.cancel()
    assert entered == exited == [actor]
    assert len(callers) == 5
    for task in callers:  # every call ran in a task the actor owns, never in a caller's task
        assert task is not trio.lowlevel.current_task()
        assert _descends_from(task, actor)


def _descends_from(task: trio.lowlevel.Task, ancestor: trio.lowlevel.Task) -> bool:
    while task is not ancestor:
        parent = task.parent_nursery
        if parent is None or parent.parent_task is task:
            return False
        task = parent.parent_task
    return True


# --------------------------------------------------------------------------- supervision


@attrs.define
class FlakyConnect:
    """A connector: the first ``failures`` attempts fail, later ones connect for real."""

    failures: int
    attempts: list[float] = attrs.field(factory=list)
    links: list[Link] = attrs.field(factory=list)

    @asynccontextmanager
    async def __call__(self, spec: ServerSpec, *, link: Link, **kwargs: Any) -> AsyncIterator[mcp.Client]:
        self.attempts.append(trio.current_time())
        self.links.append(link)
        if len(self.attempts) <= self.failures:
            raise OSError(f"attempt {len(self.attempts)} refused")
        async with open_client(spec, link=link, **kwargs) as client:
            yield client


async def test_backoff_doubles_up_to_its_cap(autojump_clock: trio.abc.Clock) -> None:
    flaky = FlakyConnect(failures=5)
    policy = RestartPolicy(max_restarts=10, backoff_initial=1.0, backoff_max=4.0)
    async with running(memory_spec(restart=policy), connect=flaky) as handle:
        assert handle.state is ServerState.RESTARTING
        assert "attempt 1 refused" in (handle.statistics().last_error or "")
        down = await handle.call_tool("echo", {"text": "x"})
        assert down.kind is ErrorKind.SERVER_UNAVAILABLE
        assert "attempt 1 refused" in (down.error or "")
        await handle.wait_for_state(ServerState.READY)
        assert (await handle.call_tool("echo", {"text": "x"})).ok
        assert handle.statistics().restarts == 5
    gaps = [b - a for a, b in zip(flaky.attempts, flaky.attempts[1:], strict=False)]
    assert gaps == pytest.approx([1.0, 2.0, 4.0, 4.0, 4.0])


async def test_a_server_that_keeps_failing_is_retried_forever_at_the_capped_pace(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Issue 34, item 5: by default the actor never gives up; the delay stops growing at ``backoff.max``, and the
    statistics say when the next attempt is."""
    flaky = FlakyConnect(failures=200)
    policy = RestartPolicy(backoff_initial=0.5, backoff_max=30.0)
    assert policy.max_restarts is None  # the default
    async with running(memory_spec(restart=policy), connect=flaky) as handle:
        await trio.sleep(3600)  # an hour of failures
        assert handle.state is ServerState.RESTARTING
        gaps = [b - a for a, b in zip(flaky.attempts, flaky.attempts[1:], strict=False)]
        assert gaps[:7] == pytest.approx([0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0])
        assert gaps[6:] == pytest.approx([30.0] * len(gaps[6:]))
        assert len(flaky.attempts) > 100
        waited = trio.current_time() - flaky.attempts[-1]
        assert handle.statistics().next_attempt_in == pytest.approx(30.0 - waited)
        await handle.wait_for_state(ServerState.READY)  # attempt 201 connects
        assert handle.statistics().next_attempt_in is None
        assert (await handle.call_tool("echo", {"text": "x"})).ok
        assert handle.statistics().restarts == 200


async def test_gives_up_after_max_restarts(autojump_clock: trio.abc.Clock) -> None:
    flaky = FlakyConnect(failures=100)
    policy = RestartPolicy(max_restarts=3, backoff_initial=0.5, backoff_max=30.0)
    async with running(memory_spec(restart=policy), connect=flaky) as handle:
        await handle.wait_for_state(ServerState.DOWN)
        await trio.sleep(600)
        assert len(flaky.attempts) == 4
        assert handle.statistics().restarts == 3
        start = trio.current_time()
        outcome = await handle.call_tool("echo", {"text": "x"})
        assert trio.current_time() == start
    assert outcome.kind is ErrorKind.SERVER_UNAVAILABLE
    assert "down" in (outcome.error or "")


async def test_lost_connection_fails_in_flight_calls_and_restarts(autojump_clock: trio.abc.Clock) -> None:
    flaky = FlakyConnect(failures=0)
    async with running(memory_spec(timeout=100), connect=flaky) as handle:
        outcomes = await fail_in_flight(
            handle, 5, lambda: flaky.links[0].mark_lost("the transport broke", exit_code=9), within=0.1
        )
        assert all("the transport broke (exit code 9)" in (o.error or "") for o in outcomes)
        await handle.wait_for_state(ServerState.READY)
        assert (await handle.call_tool("add", {"a": 1, "b": 2})).result == {"sum": 3}
        assert handle.statistics().restarts == 1
        assert handle.tools_version == 2


async def test_connect_timeout_reports_and_retries(autojump_clock: trio.abc.Clock) -> None:
    @asynccontextmanager
    async def hanging(spec: ServerSpec, *, link: Link, **kwargs: Any) -> AsyncIterator[mcp.Client]:
        await trio.sleep_forever()
        yield

    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        handle = await nursery.start(
            functools.partial(serve_mcp_server, memory_spec(connect_timeout=3.0), connect=hanging)
        )
        assert trio.current_time() - start == pytest.approx(3.0)
        assert handle.statistics().state is ServerState.RESTARTING
        assert "no connection within 3s" in (handle.statistics().last_error or "")
        nursery.cancel_scope.cancel()
    assert handle.statistics().state is ServerState.STOPPED


async def test_calls_after_the_actor_stopped_fail_fast() -> None:
    async with running(memory_spec()) as handle:
        pass
    outcome = await handle.call_tool("echo", {"text": "x"})
    assert outcome.kind is ErrorKind.SERVER_UNAVAILABLE
    assert handle.state is ServerState.STOPPED


async def test_a_session_failing_as_a_whole_is_a_lost_server(autojump_clock: trio.abc.Clock) -> None:
    """The MCP SDK's streamable-HTTP trap: an error escapes the client's own task group, as an exception group, and
    fails the whole session, so the actor takes it for a lost server."""
    fail = trio.Event()
    lives = 0

    @asynccontextmanager
    async def breaking(spec: ServerSpec, *, link: Link, **kwargs: Any) -> AsyncIterator[mcp.Client]:
        nonlocal lives
        lives += 1

        async def session_task() -> None:
            await fail.wait()
            raise OSError("the session failed")

        async with open_client(spec, link=link, **kwargs) as client, trio.open_nursery() as nursery:
            if lives == 1:
                nursery.start_soon(session_task)
            yield client

    async with running(memory_spec(timeout=100), connect=breaking) as handle:
        await fail_in_flight(handle, 3, fail.set, within=0.1)
        assert "OSError: the session failed" in (handle.statistics().last_error or "")
        await handle.wait_for_state(ServerState.READY)
        assert (await handle.call_tool("echo", {"text": "again"})).result == {"text": "again"}
        assert lives == 2


async def test_the_handle_holds_only_the_send_side_and_the_status() -> None:
    async with running(memory_spec()) as handle:
        held = [getattr(handle, field.name) for field in attrs.fields(type(handle))]
    # ... and the way to the store's held calls, when the runtime gives one, and the input handler that answers a
    # task's questions in process, when given (neither here); and its own limit on the requests about tasks that
    # take room in the queue at once
    names = [type(value).__name__ for value in held]
    assert names == ["ServerSpec", "MemorySendChannel", "ServerStatus", "NoneType", "NoneType", "Semaphore"]
    assert not any(isinstance(value, trio.Nursery | trio.MemoryReceiveChannel) for value in held)


async def test_a_worker_waiting_for_the_next_call_keeps_nothing_of_the_last() -> None:
    """The outcome of a call (a tool result of megabytes) is the caller's alone once answered: each of the
    ``max_concurrency`` idle workers used to keep its last call's, 16 of them (issue 29 defect 3)."""
    async with running(memory_spec(max_concurrency=4)) as handle:
        outcomes = [await handle.call_tool("echo", {"text": f"call {n}"}) for n in range(8)]
        assert all(outcome.error is None for outcome in outcomes)
        kept = [weakref.ref(outcome) for outcome in outcomes]
        del outcomes
        await trio.testing.wait_all_tasks_blocked()
        assert [ref() for ref in kept] == [None] * 8  # freed by reference counting, with no one left holding it
