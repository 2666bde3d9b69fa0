"""Following a task to its end, in the caller's task: store the handle, poll, report, cancel.

A call answered with a task (:func:`follow_task`) first gives the task's
:class:`~yao_actors.store.task_handle.TaskHandle` to its :class:`~yao_actors.tools.task_handle.TaskWatch`
(the run stores it with the thread) and only then waits on it; a stored task is taken up again with
:func:`poll_handle` (after a restart, on another worker). Either way the task is polled at the interval the
server asks for (``tasks/get``, bounded by :mod:`~yao_actors.tools.task_state`), each new status message goes
to the call's progress, and the call returns once: the task's result, its error, or — past the handle's
deadline (the assistant's ``task_timeout``) — a ``timeout`` saying the task did not finish. The caller's own
deadline (``options.deadline``: a turn's, a batch's) bounded the request that created the task, not the wait for
it, and the watch's ``waiting`` holds the run's deadline still meanwhile: only ``task_timeout`` and cancelling the
run end the wait early. Whenever the wait ends before the task did the server is asked to stop it with
``tasks/cancel`` (never ``notifications/cancelled``: a task outlives its request). A server actor with an input
handler has a 2026-07-28 task's questions answered on the way (``tasks/update``, :class:`TaskLine`), and the task
followed on.

The polling holds no worker of the server actor: each poll is one short request through the actor
(``ops``). A poll the network failed (the server restarting) is tried again once the server is back, within the
task's deadline.
"""

from __future__ import annotations

import inspect
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import nullcontext
from typing import Any, Final

import attrs
import trio

from yao_actors.errors import ErrorKind, StoreError
from yao_actors.observability.metrics import OPEN_TASKS, TASKS, labelled
from yao_actors.store.task_handle import TaskDesign, TaskHandle
from yao_actors.tools.input_requests import InputHandler
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.task_input import answer_in_process, input_outcome, task_round, wire_responses
from yao_actors.tools.task_state import (
    MIN_POLL_INTERVAL,
    STATUS_EVERY,
    TaskOp,
    TaskState,
    status_text,
    stored_poll_interval,
)
from yao_actors.tools.tool_server import CallOptions, ProgressFn

#: The seconds a run waits for a task when no watch says (the assistant's ``task_timeout`` default).
DEFAULT_TASK_TIMEOUT: Final = 3600.0
#: The seconds a ``tasks/cancel`` may take when the wait for a task ends early.
CANCEL_WAIT: Final = 5.0
#: The widest grid (seconds) the polls of many tasks are gathered on (:func:`sleep_coalesced`).
TICK: Final = 0.25
#: The error of a task that did not end within the run's wait for it.
UNFINISHED: Final = (
    "the task {task!r} of tool {tool!r} did not finish within {timeout:g}s (task_timeout); "
    "the server was asked to cancel it"
)

#: The error of a task whose handle could not be kept with its run (the run's thread is gone).
NOT_KEPT: Final = "the task {task!r} of tool {tool!r} could not be kept ({why}); the server was asked to cancel it"

#: The error of a task the server says was cancelled (by itself, or at the client's asking).
CANCELLED: Final = "the task {task!r} of tool {tool!r} was cancelled by the server{why}"

Ops = Callable[[TaskOp], Awaitable[ToolOutcome]]
"""Sends one request about a task through the server actor; its outcome."""
Waiter = Callable[[], Awaitable[object]]
"""Returns once the server is ready to serve requests again."""


@attrs.frozen
class TaskLine:
    """How a caller reaches the tasks of one server: its id, one request about a task through its actor
    (``ops``), the wait until it is ready again, and who answers a 2026-07-28 task's questions in process, as the
    call's own (``answer``, each question within ``patience`` seconds; ``None``: the call ends ``input_required``
    and the run puts them to the user)."""

    server: str
    ops: Ops
    ready: Waiter
    answer: InputHandler | None = None
    patience: float = math.inf


async def follow_task(
    line: TaskLine,
    start: TaskState,
    tool: str,
    arguments: dict[str, Any],
    options: CallOptions,
    answered: frozenset[str] = frozenset(),
) -> ToolOutcome:
    """Follow the task a call of ``tool`` was answered with (``start``) to its end; store it first. ``answered``:
    the keys of the task's input requests the user has answered (a call that resumes the task with answers).
    With ``line.answer`` its questions are answered on the way (``tasks/update``), and the task followed on."""
    while True:
        handle = _handle(line.server, start, tool, arguments, options)
        outcome = await _keep_and_poll(line, handle, start, options, answered)
        if line.answer is None or (asked := task_round(outcome)) is None:
            return outcome
        round_, start = asked
        answers = await answer_in_process(line.answer, round_, line.patience)
        acknowledged = await update_task(line.ops, start, tool, answers.responses)
        if acknowledged.task is None:  # refused: the server does not know the task (any more)
            return acknowledged
        answered = frozenset(answers.responses)


async def update_task(ops: Ops, task: TaskState, tool: str, responses: Mapping[str, Any]) -> ToolOutcome:
    """Give a 2026-07-28 task the user's answers (``tasks/update``); the server's acknowledgement (its ``task``
    ``None``: refused, the server does not know the task)."""
    return await ops(TaskOp("update", task.design, task.task_id, tool, wire_responses(responses)))


def _handle(server: str, start: TaskState, tool: str, arguments: dict[str, Any], options: CallOptions) -> TaskHandle:
    """The handle of the task ``start``, as its watch keeps it (no watch: a handle kept by nobody)."""
    watch = options.tasks
    now = time.time()
    timeout = watch.timeout if watch is not None else DEFAULT_TASK_TIMEOUT
    return TaskHandle(
        server=server,
        task_id=start.task_id,
        design=start.design,
        call_id=watch.call_id if watch is not None else "",
        tool=tool,
        arguments=arguments,
        run_id=watch.run_id if watch is not None else "",
        thread_id=watch.thread_id if watch is not None else "",
        created_at=now,
        deadline=now + timeout,
        poll_interval=start.poll_interval,
        session_id=start.session_id,
    )


async def _keep_and_poll(
    line: TaskLine, handle: TaskHandle, start: TaskState, options: CallOptions, answered: frozenset[str]
) -> ToolOutcome:
    """Store ``handle`` through the call's watch, then poll its task (``start``: as last seen) to its end; a task
    that cannot be kept is cancelled at the server."""
    if not answered:
        labelled(TASKS, line.server, "created").inc()
    if options.tasks is not None:
        try:
            await options.tasks.stored(handle)
        except StoreError as error:  # its thread is gone, say: the task is not left running at the server
            await cancel_task(line.ops, handle, "abandoned")
            return ToolOutcome(
                error=NOT_KEPT.format(task=handle.task_id, tool=handle.tool, why=error), kind=ErrorKind.TOOL_ERROR
            )
        except BaseException:  # the wait ended before polling began (the run cancelled): nor is it left then
            await cancel_task(line.ops, handle, "abandoned")
            raise
    return await poll_handle(line.ops, line.ready, handle, options, start, answered)


async def bounded_cancel(handle: TaskHandle, ask: Callable[[], Awaitable[ToolOutcome]]) -> ToolOutcome:
    """``ask`` the server to stop ``handle``'s task, shielded from the caller's cancelling (a cancel nobody waits
    for must not be dropped) and bounded by :data:`CANCEL_WAIT` (nor hang its caller): its answer, or a
    ``timeout`` past the bound."""
    error = f"tasks/cancel of task {handle.task_id!r} got no answer within {CANCEL_WAIT:g}s"
    outcome = ToolOutcome(error=error, kind=ErrorKind.TIMEOUT)
    with trio.CancelScope(shield=True, deadline=trio.current_time() + CANCEL_WAIT):
        outcome = await ask()
    return outcome


async def cancel_task(ops: Ops, handle: TaskHandle, ended: str | None = None) -> ToolOutcome:
    """Ask the server to stop ``handle``'s task (:func:`bounded_cancel`); ``ended`` counts the task as ended so
    (when the wait never began). The server's answer (a ``timeout`` past the bound)."""
    outcome = await bounded_cancel(handle, lambda: ops(TaskOp("cancel", handle.design, handle.task_id, handle.tool)))
    if ended is not None:
        labelled(TASKS, handle.server, ended).inc()
    return outcome


async def poll_handle(
    ops: Ops,
    ready: Waiter,
    handle: TaskHandle,
    options: CallOptions,
    seen: TaskState | None = None,
    answered: frozenset[str] = frozenset(),
) -> ToolOutcome:
    """Poll the task of ``handle`` until it ends or its deadline passes; ``seen``: its state as last known."""
    started = trio.current_time()
    own = own_deadline(handle, options)
    follower = _Follower(ops, ready, handle, options.progress, answered=answered)
    waiting = labelled(OPEN_TASKS, handle.server)
    waiting.inc()
    ended = "abandoned"  # until the wait ends otherwise: the run was cancelled
    pause = options.tasks.waiting() if options.tasks is not None else nullcontext()
    try:
        # The task's own deadline only: the caller's (a turn's, a batch's) bounded the request that created it.
        with pause, trio.CancelScope(deadline=own) as scope:
            try:
                outcome = await follower.run(seen)
            finally:
                if not follower.ended:
                    await follower.cancel()
        if not scope.cancelled_caught:
            ended = _ended(outcome)
            return attrs.evolve(outcome, task=None, duration=trio.current_time() - started)
        ended = "timeout"
        timeout = handle.wait_until(task_timeout(options)) - handle.created_at
        error = UNFINISHED.format(task=handle.task_id, tool=handle.tool, timeout=timeout)
        return ToolOutcome(error=error, kind=ErrorKind.TIMEOUT, duration=trio.current_time() - started)
    finally:
        waiting.dec()
        labelled(TASKS, handle.server, ended).inc()


def task_timeout(options: CallOptions) -> float:
    """How long the run waits for a task (its watch's ``timeout``, or the default)."""
    return options.tasks.timeout if options.tasks is not None else DEFAULT_TASK_TIMEOUT


def own_deadline(handle: TaskHandle, options: CallOptions) -> float:
    """The ``trio.current_time()`` past which the wait for ``handle``'s task ends: its deadline, no later than the
    run's ``task_timeout`` from its creation (:meth:`~yao_actors.store.task_handle.TaskHandle.wait_until`)."""
    return trio.current_time() + max(0.0, handle.wait_until(task_timeout(options)) - time.time())


def _ended(outcome: ToolOutcome) -> str:
    """How a wait that got its answer ended, for the metrics: the task's result (a tool's own ``isError`` result
    too), the user's input asked for, or an error (the task failed, was cancelled by the server, or was lost)."""
    if outcome.kind is ErrorKind.INPUT_REQUIRED:
        return "input_required"
    return "completed" if outcome.ok or outcome.result is not None else "failed"


@attrs.define(eq=False)
class _Follower:
    """One wait on one task: its polls, the status messages said so far, whether it ended."""

    ops: Ops
    ready: Waiter
    handle: TaskHandle
    progress: ProgressFn | None
    ended: bool = False
    said: str | None = None
    """The last status message taken (passed on, or waiting its turn in ``pending``)."""
    pending: str | None = None
    sent_at: float = -math.inf
    reports: int = 0
    answered: frozenset[str] = frozenset()
    """Keys of the task's input requests already answered: asked again (the server's acknowledgement of the
    answers is eventually consistent), they are not put to the user twice."""

    get: TaskOp = attrs.field(init=False)
    """The ``tasks/get`` of this task, made once (every poll sends the same)."""

    @get.default
    def _get(self) -> TaskOp:
        return self.op("get")

    def op(self, kind: Any) -> TaskOp:
        return TaskOp(kind, self.handle.design, self.handle.task_id, self.handle.tool)

    async def run(self, seen: TaskState | None) -> ToolOutcome:
        outcome = await self.follow(seen)
        await self.send()  # the last status message is never lost to the pace
        return outcome

    async def follow(self, seen: TaskState | None) -> ToolOutcome:
        interval = stored_poll_interval(self.handle.poll_interval)
        state = seen
        while state is None or not (state.ended or self.asks(state)):
            if state is not None:
                await self.report(state)
                interval = state.poll_interval or interval
                await self.pause(interval)
            else:
                await self.pause(first_wait(interval))
            outcome = await self.poll()
            if outcome.task is None:  # the task's result or error, or a poll that failed for good
                return self.finish(outcome)
            state = outcome.task
        await self.report(state)
        if state.status == "cancelled":
            return self.finish(cancelled_outcome(self.handle.task_id, self.handle.tool, state.message))
        if self.handshake_era:
            # A 2025-11-25 task's result (and the questions it asks meanwhile) comes from tasks/result.
            return self.finish(await self.ops(self.op("result")))
        if state.status == "input_required":
            outcome = input_outcome(self.handle, state)
            # The task waits for the user's answers (unless its questions cannot be put: then it is cancelled).
            self.ended = outcome.kind is ErrorKind.INPUT_REQUIRED
            return outcome
        # Ended, as seen in an answer that does not carry the result (the task's creation): tasks/get has it.
        outcome = await self.poll()
        return self.finish(outcome if outcome.task is None else _no_result(self.handle, outcome.task))

    def asks(self, state: TaskState) -> bool:
        """Whether the task now waits for input not answered yet (2025-11-25: tasks/result carries the asking)."""
        if state.status != "input_required":
            return False
        return self.handshake_era or not set(state.input_requests or {}) <= self.answered

    @property
    def handshake_era(self) -> bool:
        return self.handle.design is TaskDesign.HANDSHAKE_ERA

    async def poll(self) -> ToolOutcome:
        """One ``tasks/get``; tried again once the server is back when the network failed it."""
        while True:
            outcome = await self.ops(self.get)
            if outcome.kind is not ErrorKind.SERVER_UNAVAILABLE:
                return outcome
            await self.ready()
            # Not at once: a server that came back at once (or whose actor answers ``server_unavailable`` for
            # another reason) would otherwise be polled in a spin; spread, so its tasks do not come back together.
            await sleep_coalesced(first_wait(stored_poll_interval(self.handle.poll_interval)))

    async def report(self, state: TaskState) -> None:
        """Pass a new status message on as the call's progress (each becomes an event the run keeps): cut to
        :data:`~yao_actors.tools.task_state.MAX_STATUS_BYTES`, at most one every
        :data:`~yao_actors.tools.task_state.STATUS_EVERY` seconds, the latest waiting its turn."""
        if state.message is None or self.progress is None:
            return
        message = status_text(state.message)
        if message != self.said:
            self.said = self.pending = message
        if trio.current_time() >= self.sent_at + STATUS_EVERY:
            await self.send()

    async def pause(self, interval: float) -> None:
        """Sleep ``interval`` seconds between polls (:func:`sleep_coalesced`); a status message waiting its turn is
        sent when its turn comes meanwhile."""
        end = trio.current_time() + interval
        if self.pending is not None and self.sent_at + STATUS_EVERY < end:
            await trio.sleep_until(self.sent_at + STATUS_EVERY)
            await self.send()
        await sleep_coalesced(max(0.0, end - trio.current_time()))

    async def send(self) -> None:
        """Pass the status message waiting on, if any."""
        if self.pending is None or self.progress is None:
            return
        message, self.pending = self.pending, None
        self.sent_at = trio.current_time()
        self.reports += 1
        reported = self.progress(float(self.reports), None, message)
        if inspect.isawaitable(reported):
            await reported

    def finish(self, outcome: ToolOutcome) -> ToolOutcome:
        self.ended = outcome.kind is not ErrorKind.INPUT_REQUIRED or self.handshake_era
        return outcome

    async def cancel(self) -> None:
        """Ask the server to stop the task (the wait for it ended first); a bounded, shielded request."""
        self.ended = True
        await cancel_task(self.ops, self.handle)


async def sleep_coalesced(seconds: float) -> None:
    """Sleep at least ``seconds``, waking on the next tick of a grid of a tenth of them (at most ``TICK``): the
    polls of many tasks that fall due within one tick go out together, in one wake-up of the worker, which costs
    less CPU per poll than as many wake-ups; never earlier than the server asked."""
    tick = min(TICK, seconds / 10)
    due = trio.current_time() + seconds
    await trio.sleep_until(math.ceil(due / tick) * tick if tick > 0 else due)


def first_wait(interval: float) -> float:
    """The wait before the first poll of a task taken up without a recent answer (a stored handle, or after the
    server came back): the interval, spread evenly over half of it either side, so that a worker taking up a
    thousand tasks at once (a restart) does not poll them in one burst and then in lockstep every interval."""
    return max(MIN_POLL_INTERVAL, interval * (0.5 + random.random()))


def _no_result(handle: TaskHandle, state: TaskState) -> ToolOutcome:
    """A 2026-07-28 task ``tasks/get`` says ended, with neither result nor error."""
    error = f"the task {handle.task_id!r} of tool {handle.tool!r} ended {state.status!r} without a result"
    return ToolOutcome(error=error, kind=ErrorKind.TOOL_ERROR)


def cancelled_outcome(task_id: str, tool: str, message: str | None, duration: float = 0.0) -> ToolOutcome:
    """The outcome of a task the server reports cancelled."""
    why = f": {message}" if message else ""
    text = CANCELLED.format(task=task_id, tool=tool, why=why)
    return ToolOutcome(error=text, kind=ErrorKind.TOOL_ERROR, duration=duration)
