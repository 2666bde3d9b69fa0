"""Keeping a run's tasks: a call a server answers with a task is stored with its thread before the run waits on it.

The conversation actor gives each run a :class:`TaskKeeper`; its :meth:`TaskKeeper.watch` is the
:class:`~yao_actors.tools.task_handle.TaskWatch` of each call the run makes. When a server answers a call with a
task, the keeper first has the run's events so far written (the model's message and its tool calls: what
another process needs to take the run up again, :mod:`~yao_actors.conversation.durable.task_resume`), then saves
the task's handle in the store's :class:`~yao_actors.store.protocol.TaskRecords`, stamped with the run's
principal (whose connection polls it later), and only then does the call go on polling. Once the run is over in
the store (its close-out), its handles are removed: a task the run followed to its end needs no keeping, and one
it stopped waiting for was asked to stop.

A process that dies meanwhile leaves the handle: its run stays ``running`` for another process to take up
(the thread's lease does not close a run that has open tasks).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext

import attrs
import trio

from yao_actors.conversation.order import RunOrder
from yao_actors.errors import StoreUnavailable
from yao_actors.models.base import ToolCall
from yao_actors.store import ConversationStore
from yao_actors.store.task_handle import TaskHandle
from yao_actors.tasks import patiently
from yao_actors.tools.task_flow import DEFAULT_TASK_TIMEOUT
from yao_actors.tools.task_handle import TaskWatch

logger = logging.getLogger(__name__)

Flush = Callable[[], Awaitable[None]]
"""Writes what a run emitted so far (:meth:`~yao_actors.conversation.durable.journal.RunJournal.flush`)."""


@attrs.define(eq=False)
class TaskKeeper:
    """The tasks of one run: their watches, and the handles it stored."""

    store: ConversationStore
    thread_id: str
    run_id: str
    principal: str | None
    written: Flush
    """Has the run's events so far written (the run journal's ``flush``)."""
    timeout: float = DEFAULT_TASK_TIMEOUT
    waiting: Callable[[], AbstractContextManager[None]] = nullcontext
    """Entered around each wait on a task: the run's deadline stands still meanwhile
    (:meth:`~yao_actors.conversation.run_deadline.RunDeadline.waiting`)."""
    kept: list[TaskHandle] = attrs.field(factory=list)

    def watch(self, call: ToolCall) -> TaskWatch:
        """The watch of one call of the run."""
        return TaskWatch(call.id, self.run_id, self.thread_id, self.timeout, self.stored, self.waiting)

    async def stored(self, handle: TaskHandle) -> None:
        """Write the run's events so far, then keep ``handle`` with the thread (before the call polls it)."""
        if handle.principal is None and self.principal is not None:
            handle = attrs.evolve(handle, principal=self.principal)
        records = self.store.tasks()
        if records is None:
            return  # the store keeps no tasks: this process follows it to its end, or nobody does
        await self.written()
        try:
            await patiently(lambda: records.save(handle))
        except StoreUnavailable as error:
            logger.warning(
                "run %s: the task %s of %s could not be stored (a restart loses it): %s",
                self.run_id,
                handle.task_id,
                handle.tool,
                error,
            )
            return
        self.kept.append(handle)

    async def forget(self) -> None:
        """Remove the run's handles (its close-out is written); shielded, and a store out of reach only logged."""
        records = self.store.tasks()
        if records is None:
            return
        with trio.CancelScope(shield=True):
            while self.kept:
                handle = self.kept[-1]
                try:
                    await patiently(lambda: records.remove(handle.thread_id, handle.task_id))  # noqa: B023
                except StoreUnavailable as error:
                    logger.warning("run %s: its task %s stays stored: %s", self.run_id, handle.task_id, error)
                self.kept.pop()


def task_timeout(order: RunOrder) -> float:
    """How long a run waits for a task: its assistant's ``task_timeout``."""
    return order.assistant.task_timeout
