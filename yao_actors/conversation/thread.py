"""A thread as its conversation actor publishes it (:class:`ThreadStatus`) and the handle the manager holds of it
(:class:`ConversationHandle`): it queues runs for the actor and reads the thread's history."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import attrs
import trio

from yao_actors.conversation.interrupts.inputs import Pending
from yao_actors.conversation.order import RunOrder
from yao_actors.handles import NoPublicConstructor
from yao_actors.history_budget import BoundedHistory
from yao_actors.models.base import Message
from yao_actors.tasks import send_now_or_wait

RUN_QUEUE = 8
"""Runs that may wait for their turn on one thread before submitting waits too."""


@attrs.define(eq=False)
class ThreadStatus:
    """What a conversation actor publishes: the thread's history (only the actor changes it) and its pending runs
    (counted through :meth:`run_submitted` and :meth:`run_done`, by the handle that queues and the actor that runs).
    Changed only through its methods; the handle only reads it.

    The history is bounded (:class:`~yao_actors.history_budget.BoundedHistory`): it keeps the newest whole
    turns that fit its limit.
    """

    _history: BoundedHistory = attrs.field(factory=BoundedHistory)
    _pending: int = 0
    _approvals: list[Pending] = attrs.field(factory=list)
    """Calls held for a person's approval, or waiting for the user's answer to their server's question, by the
    thread's last run, until a run answers them (the store keeps
    them too, from before the run's terminal event until the run that answers them starts)."""
    _stored_messages: int | None = None
    """How many messages the store holds for the thread, as far as this actor knows (``None``: not known):
    a run that finds another number when it takes the thread's lease reloads the history (another process
    sharing the store ran the thread meanwhile)."""

    @classmethod
    def of(cls, max_bytes: int, history: Sequence[Message], approvals: Sequence[Pending]) -> ThreadStatus:
        """A thread as its store holds it: ``history`` (kept within ``max_bytes``) and its calls held for a person."""
        status = cls(BoundedHistory(max_bytes))
        status.reload(history, approvals)
        return status

    @property
    def messages(self) -> list[Message]:
        """The thread's messages kept so far (the actor's own list: a reader copies it)."""
        return self._history.messages

    @property
    def history_bytes(self) -> int:
        return self._history.bytes

    @property
    def pending(self) -> int:
        return self._pending

    @property
    def approvals(self) -> tuple[Pending, ...]:
        """The calls held for a person, or waiting for the user's answer."""
        return tuple(self._approvals)

    @property
    def stored_messages(self) -> int | None:
        """How many messages the store holds for the thread, as far as the actor knows (``None``: not known)."""
        return self._stored_messages

    def run_submitted(self) -> None:
        """A handle queued a run (it counts as pending from then on)."""
        self._pending += 1

    def run_done(self) -> None:
        """A queued run is over, or was never queued after all (its submission failed)."""
        self._pending -= 1

    def reload(self, history: Sequence[Message], approvals: Sequence[Pending]) -> None:
        """The store's copy of the thread stands: its ``history`` and its calls held for a person."""
        self._history.replace(history)
        self._stored_messages = len(history)
        self._approvals[:] = approvals

    def use_history(self, messages: Sequence[Message]) -> None:
        """A client's conversation stands for the thread's history (the store keeps appending what runs add)."""
        self._history.replace(messages)

    def clear_approvals(self) -> None:
        """A run answered the held calls (the store no longer keeps them)."""
        self._approvals.clear()

    def drop_approvals(self, call_ids: Collection[str]) -> tuple[Pending, ...]:
        """Forget the held calls ``call_ids``; the ones left."""
        self._approvals[:] = [p for p in self._approvals if p.call.id not in call_ids]
        return tuple(self._approvals)

    def hold(self, interrupts: Sequence[Pending]) -> None:
        """A run ended with calls held for a person (or waiting for the user's answer)."""
        self._approvals.extend(interrupts)

    def run_closed(self, stored: Sequence[Message], sizes: Sequence[int], *, in_step: bool) -> None:
        """A run closed out: the thread takes the messages its store has (``stored``, measured ``sizes``), so the
        two never disagree; ``in_step``: every write of the run went through (else the count is no longer known)."""
        self._history.extend(stored, sizes)
        if self._stored_messages is not None:
            self._stored_messages = self._stored_messages + len(stored) if in_step else None


@attrs.define(eq=False)
class ConversationHandle(metaclass=NoPublicConstructor):
    """What the manager holds of a thread's actor: it submits runs and reads the history; made by the actor."""

    thread_id: str
    owner: str | None
    """The principal that created the thread; only its runs may use it."""
    _mailbox: trio.MemorySendChannel[RunOrder]
    _status: ThreadStatus

    @property
    def history(self) -> tuple[Message, ...]:
        """A copy of the thread's messages kept so far (input, assistant and tool messages of finished runs)."""
        return tuple(self._status.messages)

    @property
    def history_bytes(self) -> int:
        """The estimated size of the history kept (:mod:`yao_actors.history_budget`)."""
        return self._status.history_bytes

    @property
    def pending(self) -> int:
        """Runs submitted and not yet finished."""
        return self._status.pending

    async def submit(self, order: RunOrder) -> None:
        """Queue a run behind the thread's earlier ones (waits while ``RUN_QUEUE`` runs already wait)."""
        self._status.run_submitted()
        try:
            await send_now_or_wait(self._mailbox, order)
        except BaseException:
            self._status.run_done()
            raise

    def close(self) -> None:
        """Take no more runs: the actor ends once the runs already submitted are done."""
        self._mailbox.close()
