"""The records a store speaks in: threads, runs, how a run ends, a lease's answer, an event as stored.

What every backend and every caller of a store share (:mod:`yao_actors.store.protocol` says what a store does with
them); nothing here does I/O.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import attrs

from yao_actors.errors import RunErrorCode

Message = Mapping[str, Any]
"""A chat message as the model sees it: ``role``, ``content``, ``tool_calls``, ``tool_call_id``."""

EventDict = dict[str, Any]
"""An AG-UI event as it went on the wire, with its per-run ``seq`` (what :meth:`ConversationStore.read_events` gives)."""


class EncodedEvent(NamedTuple):
    """An event as a store takes it: its ``seq`` and the JSON text it went on the wire as (which holds that ``seq``
    too). The caller encodes it (a run's events are encoded once, for the wire and the store); the store keeps the
    text as given, so it never depends on how an event or a tool result is made."""

    seq: int
    text: str


INTERRUPTED_CODE = RunErrorCode.INTERRUPTED.value
"""The ``RUN_ERROR`` code of a run whose process died before it finished."""


class AnyPrincipal(enum.Enum):
    """The type of :data:`ANY_PRINCIPAL`."""

    ANY = "any"


ANY_PRINCIPAL = AnyPrincipal.ANY
"""``list_threads`` over every owner (``None`` means threads without an owner)."""


class RunStatus(enum.StrEnum):
    """Where a run is in its life.

    ``running`` until its terminal event; ``finished`` (it ended with
    ``RUN_FINISHED``), ``failed`` (``RUN_ERROR``), or ``interrupted`` (its
    process died; the store closed it with ``RUN_ERROR`` ``interrupted``).
    """

    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


def utc(timestamp: float) -> datetime.datetime:
    """A POSIX timestamp as an aware UTC datetime."""
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC)


def iso(moment: datetime.datetime | None) -> str | None:
    """ISO 8601 with milliseconds and ``Z`` (what browsers parse), or ``None``."""
    if moment is None:
        return None
    return moment.astimezone(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@attrs.frozen
class ThreadInfo:
    """A stored thread: its id, the principal that owns it (``None``: no owner), and its times.

    ``created`` says that the ``open_thread`` call which returned it created the thread (so it has no
    history to load yet); it is not part of equality.
    """

    thread_id: str
    principal: str | None
    created_at: datetime.datetime
    updated_at: datetime.datetime
    created: bool = attrs.field(default=False, eq=False)


@attrs.frozen
class RunRecord:
    """A stored run.

    ``outcome`` is the runtime's word for how it ended (``answered``,
    ``cancelled``, ``error``, ``interrupted``, ...), ``None`` while running;
    ``usage`` the token counts it reported. ``owner`` is the token of the store
    object that started it (the process running it; the lease holder once runs
    take leases).
    """

    run_id: str
    thread_id: str
    assistant: str
    status: RunStatus
    started_at: datetime.datetime
    owner: str
    outcome: str | None = None
    usage: Mapping[str, Any] = attrs.field(factory=dict)
    finished_at: datetime.datetime | None = None

    def to_wire(self) -> dict[str, Any]:
        """The entry of a ``runs`` list: ``runId``, ``assistant``, ``outcome``, ISO times, ``usage``."""
        return {
            "runId": self.run_id,
            "assistant": self.assistant,
            "outcome": self.outcome,
            "startedAt": iso(self.started_at),
            "finishedAt": iso(self.finished_at),
            "usage": dict(self.usage),
        }


@attrs.frozen
class RunFinish:
    """How a run ended, for the store to close its record with (``append_turn``'s ``finish``)."""

    status: RunStatus
    outcome: str
    usage: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Taken:
    """The answer to a lease request: whether it was taken, the dead runs it closed, and the thread's size.

    ``stored_messages`` is how many messages the store holds for the thread (``None``: the store is not
    shared, so no other process can have added any).
    """

    taken: bool
    closed: tuple[str, ...] = ()
    stored_messages: int | None = None
    started: bool = False
    """The same step started the run asked for too (``take_and_start``)."""


@attrs.frozen
class RunStart:
    """A run to start together with taking its thread's lease (``take_and_start``): its id, assistant and input
    (what :meth:`ConversationStore.start_run` takes), and how many messages the caller's copy of the thread's
    history says the store holds (``None``: start whatever it holds)."""

    run_id: str
    assistant: str
    messages: Sequence[Message]
    expect_messages: int | None


@attrs.frozen
class ThreadKeeper:
    """One that keeps a store's threads in memory too (a conversation manager), asked before the store forgets one
    of them (:meth:`~yao_actors.store.ConversationStore.thread_keepers`; the memory store's budget does)."""

    keeps: Callable[[str], bool]
    """``True`` while the thread must stay: runs wait on it, or it is being loaded."""
    drop: Callable[[str], None]
    """The store forgets the thread: drop your copy of it."""


def interrupted_event(run_id: str, seq: int, now: float) -> EventDict:
    """The terminal event the store appends for a run whose process died."""
    return {
        "type": "RUN_ERROR",
        "message": "the run was interrupted: the process running it ended before it finished",
        "code": INTERRUPTED_CODE,
        "timestamp": int(now * 1000),
        "runId": run_id,
        "seq": seq,
    }


INTERRUPTED_MESSAGE = interrupted_event("", 0, 0.0)["message"]
