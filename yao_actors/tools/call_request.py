"""One call on its way to a server actor and back: :class:`CallRequest`, and the caller's wait for its outcome.

A caller (:class:`~yao_actors.tools.server_handle.ServerHandle`) puts a request in the actor's inbox and waits on
the request itself (:func:`await_outcome`): the actor's worker reports progress items on it, then answers it with
the outcome. The way back costs one wake-up of the caller's task, and is bounded: at most :data:`PROGRESS_BUFFER`
progress items wait for a slow caller.
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import math
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import trio
from opentelemetry.context import Context

from yao_actors.tools.input_requests import ParkedQuestion
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.task_state import TaskOp
from yao_actors.tools.tool_server import ProgressFn

#: Progress items buffered for one slow caller before newer ones are dropped (plus one slot for the outcome).
PROGRESS_BUFFER = 16


@attrs.frozen
class ProgressItem:
    progress: float
    total: float | None
    message: str | None


@attrs.define(eq=False)
class CallRequest:
    """One ``tools/call`` on its way to the actor, and its way back: progress items, then the outcome.

    ``scope`` lets the caller abandon the call; ``trace_context`` is the caller's trace context, which the
    actor's worker makes current while it runs the call (``None`` while tracing is off). The way back is the
    request itself: the worker that answers wakes the caller's task, parked on the request (no channel, no
    event of its own: a call costs one wake-up on its way back, and nothing more). It is bounded all the same:
    at most ``PROGRESS_BUFFER`` progress items wait, newer ones are dropped; a call that gets none has no queue.
    """

    name: str
    arguments: dict[str, Any]
    started: float
    wants_progress: bool
    trace_context: Context | None = None
    input_responses: Mapping[str, Any] | None = None
    request_state: str | None = None
    task_op: TaskOp | None = None
    """Not a ``tools/call``: a request about a task of tool ``name`` (:mod:`~yao_actors.tools.task_state`)."""
    method: str = "tools/call"
    """``tools/call``, or an app's ``resources/read`` (``name``: the URI) or ``ping``."""
    keep_result: bool = False
    """Keep the MCP result as the server sent it (``ToolOutcome.app_result``)."""
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    deadline_scope: trio.CancelScope | None = attrs.field(default=None, init=False)
    parked: ParkedQuestion | None = attrs.field(default=None, init=False)
    outcome: ToolOutcome | None = attrs.field(default=None, init=False)
    progress: collections.deque[ProgressItem] | None = attrs.field(default=None, init=False)
    """The progress items the caller has not taken yet (``None`` until the first)."""
    _waiter: trio.lowlevel.Task | None = attrs.field(default=None, init=False)
    """The caller's task while it waits for news of the call."""
    _news: bool = attrs.field(default=False, init=False)
    """Something arrived since the caller's last wait."""

    def answer(self, outcome: ToolOutcome) -> None:
        """Deliver the outcome (the first one counts); a caller that gave up is not waiting for it.

        Once the caller has had an ``input_required`` outcome and the call stays open (``parked``), what comes
        later goes to whoever answers the question.
        """
        if self.outcome is None:
            self.outcome = outcome
            self._wake()
        elif self.parked is not None:
            self.parked.finish(outcome)

    def report(self, item: ProgressItem) -> None:
        """Pass a progress item on, unless ``PROGRESS_BUFFER`` items already wait for a slow caller."""
        if self.progress is None:
            self.progress = collections.deque()
        if len(self.progress) < PROGRESS_BUFFER:
            self.progress.append(item)
            self._wake()

    def _wake(self) -> None:
        self._news = True
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            trio.lowlevel.reschedule(waiter)

    @contextlib.contextmanager
    def deadline_paused(self) -> Iterator[None]:
        """While the user answers the server's question, the call's deadline stands still (it moves by the wait)."""
        scope = self.deadline_scope
        if scope is None:
            yield
            return
        deadline, paused = scope.deadline, trio.current_time()
        scope.deadline = math.inf
        try:
            yield
        finally:
            scope.deadline = deadline + (trio.current_time() - paused)

    async def wait_for_update(self) -> None:
        """Wait until a progress item or the outcome has arrived since the last wait (one caller waits)."""
        if self._news:
            await trio.lowlevel.checkpoint()
        else:
            self._waiter = trio.lowlevel.current_task()

            def abort(_: Any) -> trio.lowlevel.Abort:
                self._waiter = None
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)
        self._news = False


async def await_outcome(request: CallRequest, progress: ProgressFn | None) -> ToolOutcome:
    """The caller's side of a call: pass progress items to ``progress`` until the outcome arrives."""
    while request.outcome is None:
        await request.wait_for_update()
        while request.progress:
            item = request.progress.popleft()
            if progress is not None:
                reported = progress(item.progress, item.total, item.message)
                if inspect.isawaitable(reported):
                    await reported
    return request.outcome
