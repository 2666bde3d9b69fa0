"""Execute one model turn's tool calls: every server at once, every call answered, in order.

Every call is checked the same way
before it reaches a server (name through the catalog's table, lenient argument
parse, object check, schema); calls are grouped by server and **all groups run at
once** in one nursery; inside a group calls run concurrently (the server's actor
runs at most ``max_concurrency`` of them at a time and queues the rest), or one
by one for a server configured ``dispatch: "sequential"``. Each call runs under its server's own deadline (the
handle applies ``spec.timeout``), and one failure never cancels a sibling. Calls
of a concurrent group that failed with a retryable server-reported error are run
again once, alone, one by one (the seed's sequential fallback, narrowed to the
failed calls).

A call's result comes back once, and one way: as the :class:`CallFinished` event ``on_event`` receives (beside
:class:`CallStarted`, :class:`CallProgress` and :class:`SequentialRetry`, as things happen). Each call gets
exactly one ``CallFinished`` (a call that is about to be retried reports only its final result); ``index`` in an
event is the call's position in ``calls``, so duplicate or empty call ids never collapse. A caller that wants the
results only at the end, in ``calls`` order (the bench, a test), uses :func:`collect_tool_calls`, which gathers
them from those events. When the caller's scope is cancelled, ``trio.Cancelled`` propagates;
``batch_timeout`` instead turns what is still running into ``timeout`` results: it is handed to each call's
handle as the call's deadline (one cancel scope per call, the handle's), so it bounds the calls, not the telling
of their results. A call its server answers with a task is bounded by the batch's deadline only until the task
is created: the wait for the task is the task's (``task_timeout``, :mod:`~yao_actors.tools.task_flow`), and its
siblings keep the batch's deadline.
An exception raised by ``on_event`` ends the batch (cancelling what still runs)
and propagates as itself, not wrapped in exception groups.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

import attrs
import trio

from yao_actors.errors import ErrorKind, exception_leaves
from yao_actors.observability import tracing
from yao_actors.observability.metrics import TOOL_CALLS, TOOL_DURATION, labelled
from yao_actors.tools.apps import app_call
from yao_actors.tools.arguments import check_arguments
from yao_actors.tools.catalog import Catalog, CatalogEntry
from yao_actors.tools.dispatch_events import CallFinished as CallFinished  # the batch's events, where callers find them
from yao_actors.tools.dispatch_events import CallProgress as CallProgress
from yao_actors.tools.dispatch_events import CallStarted as CallStarted
from yao_actors.tools.dispatch_events import DispatchEvent as DispatchEvent
from yao_actors.tools.dispatch_events import OnEvent as OnEvent
from yao_actors.tools.dispatch_events import SequentialRetry as SequentialRetry
from yao_actors.tools.results import ToolCallResult, ToolOutcome
from yao_actors.tools.task_handle import TaskWatch
from yao_actors.tools.tool_call import ToolCall
from yao_actors.tools.tool_server import CallAnswers, CallOptions, ServerState, ToolServer


@attrs.frozen
class _Planned:
    """A call that passed the checks and will reach its server."""

    index: int
    call: ToolCall
    entry: CatalogEntry
    server: ToolServer = attrs.field(eq=False)
    arguments: dict[str, Any] = attrs.field(factory=dict)
    repaired: bool = False
    answers: CallAnswers | None = None
    """The user's answers to the questions an earlier call of it asked (it is made again, or resumed, with them)."""
    tasks: TaskWatch | None = None
    """Where the call keeps a task its server answers it with (its run stores the handle)."""

    def given(self, answers: CallAnswers | None, tasks: TaskWatch | None) -> _Planned:
        """This call with its ``answers`` and ``tasks`` (made directly: ``attrs.evolve`` costs more than a call's
        checks, and a run gives every call a ``tasks``)."""
        return _Planned(self.index, self.call, self.entry, self.server, self.arguments, self.repaired, answers, tasks)


@attrs.frozen
class _Refused:
    """A call refused before it reached a server: its result, its catalog entry (if any), and whether it gets a
    failed ``execute_tool`` span (not a call of a server that is down: it was never meant to run now)."""

    result: ToolCallResult
    entry: CatalogEntry | None = None
    traced: bool = True


@attrs.define(eq=False)
class _Batch:
    """The state of one ``execute_tool_calls``: a result slot per call, and the start times."""

    on_event: OnEvent
    results: list[ToolCallResult | None]
    """Each call's result once it has one, by position."""
    progress: bool = True
    """Whether the calls ask their servers for progress (a listener that wants none: the server sends none)."""
    deadline: float = math.inf
    """The batch's deadline (``trio.current_time()``), each call's caller deadline."""
    planned: dict[int, _Planned] = attrs.field(factory=dict)
    started: dict[int, float] = attrs.field(factory=dict)

    async def emit(self, event: DispatchEvent) -> None:
        await self.on_event(event)

    async def finish(self, index: int, result: ToolCallResult) -> None:
        self.results[index] = result
        labelled(TOOL_CALLS, result.server, result.tool, result.kind.value if result.kind else "ok").inc()
        if index in self.started and result.server:
            labelled(TOOL_DURATION, result.server).observe(result.duration)
        await self.emit(CallFinished(result, index))

    async def run(self, planned: _Planned, *, sequential_retry: bool = False) -> ToolCallResult:
        """Send one call to its server (in its ``execute_tool`` span) and make the result (not yet recorded).

        The batch's :attr:`deadline` is handed to the server's handle (one cancel scope for the call's deadline
        and the batch's); when the batch's expires first the result is the batch's ``timeout``.
        """
        call, entry = planned.call, planned.entry
        deadline = self.deadline
        if trio.current_time() >= deadline:  # its turn came after the batch's deadline: it is not sent
            return _timed_out(self, planned)

        async def progress(value: float, total: float | None, message: str | None) -> None:
            await self.emit(CallProgress(call, value, total, message, planned.index))

        self.started[planned.index] = trio.current_time()
        with tracing.open_span("execute_tool", lambda: _span_attributes(call, entry), target=entry.name) as span:
            if sequential_retry:
                span.set_attribute(tracing.SEQUENTIAL_RETRY, True)
            await self.emit(CallStarted(call, entry.server, entry.tool, planned.index))
            # A listener that wants no progress asks for none: the server then sends none.
            wanted = progress if self.progress else None
            try:
                options = CallOptions(wanted, deadline, planned.answers, planned.tasks)
                outcome = await planned.server.call_tool(entry.tool, planned.arguments, options)
                reconnected = outcome.connection_lost and entry.hints.safe_to_repeat
                if reconnected:
                    outcome = await _on_new_connection(planned, outcome, options)
            except trio.TooSlowError:
                result = _timed_out(self, planned)
                tracing.fail(span, ErrorKind.TIMEOUT.value, result.error or "")
                return result
            if outcome.kind is not None:
                tracing.fail(span, outcome.kind.value, outcome.error or "")
                if outcome.kind is ErrorKind.SERVER_UNAVAILABLE and span.is_recording():
                    server = planned.server
                    span.add_event(
                        "yao.mcp.server_unavailable",
                        {tracing.SERVER: entry.server, "yao.mcp.server.state": server.state.value},
                    )
        app = app_call(entry, planned.server.spec, planned.arguments, outcome.app_result)
        return ToolCallResult.of(
            call,
            entry.server,
            entry.tool,
            outcome,
            title=entry.hints.title,
            app=app,
            repaired=planned.repaired,
            sequential_retry=sequential_retry,
            reconnected=reconnected,
        )


async def execute_tool_calls(
    calls: Sequence[ToolCall],
    catalog: Catalog,
    servers: Mapping[str, ToolServer],
    *,
    on_event: OnEvent,
    mode: Literal["parallel", "sequential"] = "parallel",
    batch_timeout: float | None = None,
    answers: Mapping[str, CallAnswers] | None = None,
    progress: bool = True,
    tasks: Callable[[ToolCall], TaskWatch] | None = None,
) -> None:
    """Run ``calls`` against ``servers``, telling ``on_event`` each call's result (one ``CallFinished`` per call).

    ``mode="sequential"`` runs every call one after another across servers (a
    baseline for benchmarks). ``batch_timeout`` (seconds) bounds the whole batch:
    calls still running then are cancelled (their servers get
    ``notifications/cancelled``) and get ``timeout`` results: the deadline is handed to each call's handle
    (one cancel scope per call), so it bounds the calls, not the listener's events, and not the wait for a
    task a server answers a call with (only the request that created it). ``answers`` (by call id) give
    calls the user's answers to the questions earlier calls of them asked. ``progress=False``: no call asks its
    server for progress (no ``CallProgress`` is told). ``tasks`` gives each call the
    :class:`~yao_actors.tools.task_handle.TaskWatch` a task it is answered with is kept through.
    """
    deadline = math.inf if batch_timeout is None else trio.current_time() + batch_timeout
    batch = _Batch(on_event, [None] * len(calls), progress=progress, deadline=deadline)
    groups: dict[str, list[_Planned]] = {}
    for index, call in enumerate(calls):
        planned = await _check(batch, index, call, catalog, servers)
        if planned is not None and (answers or tasks is not None):
            planned = planned.given(answers.get(call.id) if answers else None, None if tasks is None else tasks(call))
        if planned is not None:
            batch.planned[index] = planned
            groups.setdefault(planned.entry.server, []).append(planned)
    if mode == "parallel" and len(batch.planned) == 1:
        # One call (the usual turn): in this task (a nursery and a task of its own would cost more than a
        # call to a fast server).
        (planned,) = batch.planned.values()
        await batch.finish(planned.index, await batch.run(planned))
        return
    runs: list[Callable[[], Awaitable[None]]]
    if mode == "sequential":
        ordered = sorted((p for group in groups.values() for p in group), key=lambda p: p.index)
        runs = [functools.partial(_run_one_by_one, batch, ordered)]
    else:
        runs = [run for group in groups.values() for run in _group_runs(batch, group)]
    try:
        # No scope of the batch's here: each call's handle keeps the batch's deadline (and a task the server
        # answers a call with is not cut by it).
        if len(runs) == 1:
            # One server's calls, one by one: run them in this task; a nursery and a task of their
            # own would cost more than a call to a fast server. Otherwise a task per call of a concurrent
            # group and one per group that runs one by one, all in this one nursery.
            await runs[0]()
        else:
            async with trio.open_nursery() as nursery:
                for run in runs:
                    nursery.start_soon(run)
    except* Exception as group:
        # Only a failing on_event gets here: give the caller its exception, not a tree of groups.
        raise exception_leaves(group)[0]  # noqa: B904 - the group is its context
    # Every call was either answered by its check or planned, and every planned call finished or timed out.


async def collect_tool_calls(
    calls: Sequence[ToolCall],
    catalog: Catalog,
    servers: Mapping[str, ToolServer],
    *,
    on_event: OnEvent | None = None,
    mode: Literal["parallel", "sequential"] = "parallel",
    batch_timeout: float | None = None,
    answers: Mapping[str, CallAnswers] | None = None,
) -> list[ToolCallResult]:
    """:func:`execute_tool_calls`, with the results its ``CallFinished`` events tell gathered in ``calls`` order
    and returned at the end (for a caller that wants them all then: the bench, a test). ``on_event`` still gets
    every event; without it, no call asks its server for progress."""
    told: list[ToolCallResult | None] = [None] * len(calls)

    async def gather(event: DispatchEvent) -> None:
        if isinstance(event, CallFinished):
            told[event.index] = event.result
        if on_event is not None:
            await on_event(event)

    await execute_tool_calls(
        calls,
        catalog,
        servers,
        on_event=gather,
        mode=mode,
        batch_timeout=batch_timeout,
        answers=answers,
        progress=on_event is not None,
    )
    results = [result for result in told if result is not None]
    assert len(results) == len(calls)  # execute_tool_calls tells one result per call
    return results


async def _check(
    batch: _Batch, index: int, call: ToolCall, catalog: Catalog, servers: Mapping[str, ToolServer]
) -> _Planned | None:
    """Validate one call; a call that fails here gets its result at once and reaches no server."""
    planned = _plan(index, call, catalog, servers)
    if isinstance(planned, _Planned):
        return planned
    result, entry = planned.result, planned.entry
    if planned.traced:
        with tracing.open_span("execute_tool", lambda: _span_attributes(call, entry), target=call.name) as span:
            tracing.fail(span, result.kind.value if result.kind else "error", result.error or "")
    await batch.finish(index, result)
    return None


def _plan(index: int, call: ToolCall, catalog: Catalog, servers: Mapping[str, ToolServer]) -> _Planned | _Refused:
    """The call as it will reach its server, or the result it gets instead."""
    entry = catalog.resolve(call.name)
    if entry is None and (down := catalog.unavailable_server(call.name)) is not None:
        # The model knows the tool from before (or guessed it): its server is down, the name is not wrong.
        message = f"server {down!r} is {catalog.unavailable[down]}; its tools are not available now"
        failed = failed_result(call, None, message, ErrorKind.SERVER_UNAVAILABLE)
        return _Refused(attrs.evolve(failed, server=down), traced=False)
    if entry is None:
        available = ", ".join(e.name for e in catalog.entries) or "none"
        message = f"unknown tool {call.name!r}; available tools: {available}"
        return _Refused(failed_result(call, None, message, ErrorKind.UNKNOWN_TOOL))
    if entry.server not in servers:
        message = f"server {entry.server!r} is not running"
        return _Refused(failed_result(call, entry, message, ErrorKind.SERVER_UNAVAILABLE), entry)
    arguments = check_arguments(call.arguments, entry.input_schema)
    if arguments.value is None:
        failed = failed_result(call, entry, arguments.error or "invalid arguments", ErrorKind.INVALID_ARGUMENTS)
        return _Refused(attrs.evolve(failed, repaired=arguments.repaired), entry)
    return _Planned(index, call, entry, servers[entry.server], arguments.value, arguments.repaired)


def _span_attributes(call: ToolCall, entry: CatalogEntry | None) -> dict[str, str]:
    attributes = {tracing.OPERATION: "execute_tool", tracing.TOOL_NAME: call.name, tracing.TOOL_CALL_ID: call.id}
    if entry is not None:
        attributes[tracing.SERVER] = entry.server
    return attributes


def _group_runs(batch: _Batch, group: list[_Planned]) -> list[Callable[[], Awaitable[None]]]:
    """What runs one server's calls, each to start in the batch's one nursery: a run per call of a group that runs
    concurrently (no task of the group's own between them), or one run for a group that runs one call at a time.

    The server's max_concurrency is enforced by its actor (its workers); here it only tells whether the group
    runs concurrently at all, which decides if a failure gets a sequential retry.
    """
    spec = group[0].server.spec
    if spec.dispatch == "sequential" or spec.max_concurrency < 2 or len(group) < 2:
        return [functools.partial(_run_one_by_one, batch, group)]
    retry = _Retry(len(group))
    return [functools.partial(_run_concurrently, batch, planned, retry) for planned in group]


@attrs.define(eq=False)
class _Retry:
    """A concurrent group's calls that failed retryably; the group's last call to end runs them again, one by
    one (the group's other calls are all answered by then, as when the group had a task of its own)."""

    running: int
    failed: list[_Planned] = attrs.field(factory=list)


async def _run_concurrently(batch: _Batch, planned: _Planned, retry: _Retry) -> None:
    result = await batch.run(planned)
    if result.kind is ErrorKind.TOOL_ERROR and result.retryable:
        retry.failed.append(planned)
    else:
        await batch.finish(planned.index, result)
    retry.running -= 1  # told in full: the retries come after every other result of the group, as they always did
    if retry.running or not retry.failed:
        return
    failed = sorted(retry.failed, key=lambda p: p.index)
    await batch.emit(SequentialRetry(tuple(p.call.id for p in failed), tuple(p.index for p in failed)))
    for again in failed:
        await batch.finish(again.index, await batch.run(again, sequential_retry=True))


async def _run_one_by_one(batch: _Batch, planned: list[_Planned]) -> None:
    for item in planned:
        await batch.finish(item.index, await batch.run(item))


async def _on_new_connection(planned: _Planned, lost: ToolOutcome, options: CallOptions) -> ToolOutcome:
    """Run a read-only or idempotent call again, once, when its server is ready on a new connection, within the
    call's own deadline (from its first start) and the batch's; ``lost`` when the server is not back by then."""
    server = planned.server
    own = trio.current_time() - lost.duration + server.spec.timeout
    deadline = min(options.deadline, own)
    with trio.move_on_at(deadline):
        while server.state is not ServerState.READY:
            await server.wait_state_change()
        again = await server.call_tool(planned.entry.tool, planned.arguments, attrs.evolve(options, deadline=deadline))
        return attrs.evolve(again, duration=lost.duration + again.duration)
    if deadline < own:
        raise trio.TooSlowError  # the batch's deadline
    return lost


def failed_result(call: ToolCall, entry: CatalogEntry | None, error: str, kind: ErrorKind) -> ToolCallResult:
    """The result of a call that failed before or instead of reaching its server."""
    failed = ToolOutcome(error=error, kind=kind)
    return ToolCallResult.of(call, entry.server if entry else "", entry.tool if entry else "", failed)


def _timed_out(batch: _Batch, planned: _Planned) -> ToolCallResult:
    """The result of a call the batch deadline cut off (before or while it ran)."""
    started = batch.started.get(planned.index)
    duration = trio.current_time() - started if started is not None else 0.0
    message = "the batch deadline expired before the call finished"
    failed = failed_result(planned.call, planned.entry, message, ErrorKind.TIMEOUT)
    return attrs.evolve(failed, duration=duration, repaired=planned.repaired)
