"""The store interface and the records it speaks in.

A :class:`ConversationStore` is where a thread lives between runs:
its model-facing history (the seed's message shapes), its runs, each run's
event log, and its calls waiting for a person's approval. Every method is a
Trio checkpoint; a backend that cannot be reached raises
:class:`~yao_actors.errors.StoreUnavailable` and has then written nothing
of the call that failed (every write is one transaction).
"""

from __future__ import annotations

import datetime
import enum
import inspect
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

import attrs

from yao_actors.errors import InvalidStoreInput, RunErrorCode, SeqConflict
from yao_actors.events import encode_json, encoded_event
from yao_actors.specs import DEFAULT_EVENT_TTL as DEFAULT_EVENT_TTL  # a configuration value, re-exported
from yao_actors.store.tokens import TokenRecords

Message = Mapping[str, Any]
"""A chat message as the model sees it: ``role``, ``content``, ``tool_calls``, ``tool_call_id``."""

EventDict = dict[str, Any]
"""An AG-UI event as it went on the wire, with its per-run ``seq``."""

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


class ThreadLeases(Protocol):
    """The leases of one store (see the module docstring). Every method is one atomic step in the store."""

    async def take(self, thread_id: str, token: str, ttl: float, *, also_close: str | None = None) -> Taken:
        """Take the thread's lease for ``token`` (or extend it, when ``token`` holds it) for ``ttl`` seconds.

        When taken, every run of the thread still ``running`` (and ``also_close``, a run of that thread) is
        closed as interrupted: with the lease free, nobody is running it.
        """
        ...

    async def renew(self, thread_id: str, token: str, ttl: float) -> bool:
        """Extend the lease ``token`` holds by ``ttl`` seconds; ``False`` when it no longer holds it."""
        ...

    async def reclaim(self, thread_id: str, token: str, ttl: float, run_id: str) -> bool:
        """Take the lease back for ``token`` after it expired, if nobody took it meanwhile and run ``run_id`` is
        still running (nobody took it for dead): a run whose store was out of reach for longer than ``ttl``
        goes on. ``False`` (and nothing changed) otherwise."""
        ...

    async def release(self, thread_id: str, token: str) -> None:
        """Give the lease up, if ``token`` still holds it."""
        ...

    async def unleased_running_runs(self, owner: str) -> list[tuple[str, str]]:
        """The ``(run id, thread id)`` of every run the store has as running whose thread's lease is free (expired
        or released), but those ``owner`` started (the process asking runs them: they are alive): what a sweep
        looks at. (Read in bulk; :meth:`take` checks each again, atomically.)"""
        ...


class ConversationStore(Protocol):
    """Threads, runs and run event logs, kept between runs (and processes, when durable).

    Writes are atomic: every call writes all of what it was given or nothing.
    Reads of something unknown give an empty answer (``None``, ``[]``), never
    an error. :func:`~yao_actors.store.open_store` opens one; the runs a dead
    process left running are closed through thread leases (:mod:`yao_actors.store.leases`).
    """

    event_ttl: float
    """Seconds a run's event log is kept after its last event."""

    owner: str
    """This store object's token; runs it starts carry it."""

    @property
    def durable(self) -> bool:
        """Whether the store outlives this process, and other processes may share it: a run then takes its
        thread's lease, shows an event only once stored, and reloads a history another process may have added to."""
        ...

    def leases(self) -> ThreadLeases:
        """The store's thread leases (:mod:`yao_actors.store.leases`): the same object at every call."""
        ...

    def oauth_tokens(self) -> TokenRecords:
        """The store's sealed OAuth token records (:mod:`yao_actors.store.tokens`)."""
        ...

    # -- threads

    async def open_thread(self, thread_id: str, principal: str | None) -> ThreadInfo:
        """Create the thread owned by ``principal`` (``ThreadInfo.created``), or load it as stored.

        An existing thread keeps its owner: the caller compares
        ``ThreadInfo.principal`` with its own and treats another's thread as unknown.
        """
        ...

    async def get_thread(self, thread_id: str) -> ThreadInfo | None:
        """The thread, or ``None`` when it is not stored."""
        ...

    async def list_threads(
        self, principal: str | AnyPrincipal | None = ANY_PRINCIPAL, *, limit: int = 100
    ) -> list[ThreadInfo]:
        """Threads, newest first: every thread, or those owned by ``principal``."""
        ...

    async def load_history(self, thread_id: str) -> list[Message]:
        """The thread's messages in order (``[]`` for an unknown thread)."""
        ...

    async def append_messages(self, thread_id: str, messages: Sequence[Message]) -> None:
        """Append one turn (or a whole run's new messages) to an opened thread, all or nothing.

        Give an assistant message with ``tool_calls`` and all its tool messages
        in one call, so a crash never leaves a dangling call in the history.
        """
        ...

    async def forget_thread(self, thread_id: str) -> bool:
        """Delete the thread, its history, its runs and their event logs; whether it existed."""
        ...

    # -- runs

    async def start_run(
        self, thread_id: str, run_id: str, assistant: str, input_messages: Sequence[Message]
    ) -> RunRecord:
        """Record a run as running on an opened thread, appending its input to the history in the same write."""
        ...

    async def finish_run(
        self, run_id: str, *, status: RunStatus, outcome: str, usage: Mapping[str, Any] | None = None
    ) -> bool:
        """Close a running run; ``False`` (and nothing written) when it is unknown or no longer running."""
        ...

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or ``None`` when it is not stored."""
        ...

    async def list_runs(self, thread_id: str) -> list[RunRecord]:
        """The thread's runs in the order they started."""
        ...

    # -- event logs

    async def append_events(self, run_id: str, events: Sequence[EventDict]) -> None:
        """Append a batch of a run's events (each with an integer ``seq`` above every stored one).

        Refreshes the log's expiry to ``event_ttl`` seconds from now. A batch whose
        numbers do not rise above the log's last raises :class:`~yao_actors.errors.SeqConflict` and writes nothing.
        """
        ...

    async def append_turn(
        self,
        thread_id: str,
        run_id: str,
        messages: Sequence[Message],
        events: Sequence[EventDict],
        *,
        finish: RunFinish | None = None,
        release: str | None = None,
    ) -> Sequence[int] | None:
        """Append a turn of a running run's history and a batch of its events in one write, all or nothing;
        with ``finish``, close the run's record in the same write (:meth:`finish_run`), and with ``release``
        (a lease token, only together with ``finish``) give up the thread's lease in it too, when that token
        still holds it (:meth:`ThreadLeases.release`): the run's close-out and its lease's release, one call.
        A store that takes ``release`` says so with :data:`RELEASES_WITH_FINISH` (:func:`releases_with_finish`);
        the runtime gives it to no other store (an embedder's store without it gets a separate release).

        What a run writes as it goes (its journal calls this once per turn, and once more with its terminal
        event and ``finish``): ``messages`` as :meth:`append_messages` takes them (a whole turn), ``events``
        as :meth:`append_events` does; either may be empty. :class:`~yao_actors.errors.UnknownThread` when the thread was not opened,
        :class:`~yao_actors.errors.UnknownRun` when the run is not stored on it, :class:`~yao_actors.errors.RunClosed` when the run is no longer running
        (another process closed it), :class:`~yao_actors.errors.InvalidStoreInput` or ``SeqConflict`` for a
        message or a batch those methods refuse; in each
        case nothing is written. Returns the messages' sizes (:func:`~yao_actors.history_budget.message_bytes`,
        one each) when the store measured them (the memory store does, for its budget), so the caller need
        not; else ``None``.
        """
        ...

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[EventDict]:
        """The run's stored events with ``seq > after_seq``, in order (``[]`` once expired); any integer
        ``after_seq`` is taken (:func:`seq_floor`), anything else is ``InvalidStoreInput``."""
        ...

    async def wait_events(self, run_id: str, after_seq: int, timeout: float) -> None:  # noqa: ASYNC109
        """Return once the run's log may hold events past ``after_seq``, or after at most ``timeout`` seconds.

        How a process follows a run going on in another one: Redis blocks on the run's stream
        (``XREAD BLOCK``) and returns as soon as an event is appended; SQLite and memory wait one
        poll interval (:data:`POLL_INTERVAL`, or ``timeout`` if shorter). Nothing is read: call
        :meth:`read_events` after.
        """
        ...

    # -- pending approvals

    async def save_approvals(self, thread_id: str, approvals: Sequence[Mapping[str, Any]]) -> None:
        """Replace an opened thread's pending approvals (JSON objects, kept in order); ``[]`` clears them.

        They go with the thread: ``forget_thread`` deletes them. ``UnknownThread`` for a thread that was not
        opened; ``InvalidStoreInput`` (nothing written) for an approval that is not a JSON object.
        """
        ...

    async def load_approvals(self, thread_id: str) -> list[dict[str, Any]]:
        """The thread's pending approvals as last saved (``[]`` for none, or for an unknown thread)."""
        ...


RELEASES_WITH_FINISH: Final = "releases_with_finish"
"""The attribute (``True``) by which a store says its ``append_turn`` takes ``release`` (see there)."""


def releases_with_finish(store: ConversationStore) -> bool:
    """Whether ``store``'s ``append_turn`` releases the leases of ``store.leases()`` with a run's close.

    It does when its class says so (:data:`RELEASES_WITH_FINISH`, looked up on the class: a wrapper that hands
    other attributes on to a store it holds does not inherit it), its leases are its own (a subclass or wrapper
    with leases of its own keeps them apart from the ones its store would release), and its ``append_turn``
    takes ``release`` (a subclass written before it, with its own signature, does not). Any other store gets
    the separate release (:meth:`ThreadLeases.release`), as before.
    """
    if getattr(type(store), RELEASES_WITH_FINISH, False) is not True:
        return False
    if getattr(store.leases(), "store", None) is not store:
        return False
    try:
        parameters = inspect.signature(store.append_turn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "release" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


STARTS_WITH_LEASE: Final = "starts_with_lease"
"""The attribute (``True``) by which a store says it has ``take_and_start`` (see :func:`starts_with_lease`)."""


def starts_with_lease(store: ConversationStore) -> bool:
    """Whether ``store`` takes a thread's lease and starts a run in one step: its class says so
    (:data:`STARTS_WITH_LEASE`) and its leases are its own, as for :func:`releases_with_finish`. Its
    ``take_and_start(thread_id, token, ttl, start: RunStart) -> Taken``, one atomic step:

    - the thread not opened: :class:`~yao_actors.errors.UnknownThread`; the run's id stored already:
      :class:`~yao_actors.errors.RunIdTaken`; the lease held by another token: ``Taken(False)``; in each case
      nothing is written (no lease is left behind);
    - else the lease is taken as :meth:`ThreadLeases.take` takes it (the thread's dead runs closed), and the run
      started as :meth:`ConversationStore.start_run` starts it (``Taken.started``), unless the store holds another
      number of messages than ``start.expect_messages``: then only the lease is taken (the caller's copy of the
      history is behind; it reloads it and starts the run itself).

    Any other store gets the separate calls (take, then start), as before.
    """
    if getattr(type(store), STARTS_WITH_LEASE, False) is not True:
        return False
    return getattr(store.leases(), "store", None) is store and callable(getattr(store, "take_and_start", None))


def check_release(finish: RunFinish | None, release: str | None) -> None:
    """Refuse ``release`` without ``finish``: a lease is released with the run's close only."""
    if release is not None and finish is None:
        raise InvalidStoreInput("append_turn: 'release' (a lease token) is taken only together with 'finish'")


MAX_SEQ: Final = 2**63 - 1
"""The largest event ``seq`` a store keeps (SQLite's largest ``INTEGER``): a batch above it is refused, and an
``after_seq`` above it asks for nothing (:func:`seq_floor`)."""

POLL_INTERVAL: Final = 0.5
"""Seconds a store without a blocking read waits in :meth:`ConversationStore.wait_events`."""


def new_owner_token() -> str:
    """A token naming one store object (one process's hold on its runs)."""
    return uuid.uuid4().hex


def encode_message(message: Message) -> str:
    """One message as compact JSON (:func:`~yao_actors.events.encode_json`, as events are: never a raw line feed,
    which the Redis store relies on, and valid UTF-8); refuses a message that is not a mapping with a string
    ``role``."""
    if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
        raise InvalidStoreInput(f"a stored message must be a mapping with a string 'role', got {message!r:.200}")
    return encode_json(message)


def encode_usage(usage: Mapping[str, Any] | None) -> str:
    return json.dumps(dict(usage or {}), separators=(",", ":"))


def event_seqs(events: Sequence[EventDict]) -> list[int]:
    """The ``seq`` numbers of a batch, checked to be positive integers that strictly rise."""
    seqs: list[int] = []
    for index, event in enumerate(events):
        seq = event.get("seq")
        if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= MAX_SEQ:
            raise InvalidStoreInput(f"events[{index}]: 'seq' must be a positive integer up to {MAX_SEQ}, got {seq!r}")
        if seqs and seq <= seqs[-1]:
            raise SeqConflict(f"events[{index}]: seq {seq} does not rise above {seqs[-1]}")
        seqs.append(seq)
    return seqs


def seq_floor(after_seq: int) -> int:
    """``after_seq`` as a store looks events up after it: an integer (``InvalidStoreInput`` otherwise) within
    ``0..MAX_SEQ`` (below 0 asks for every event, as 0 does; above :data:`MAX_SEQ` for none, as it does), so a
    caller's number never overflows SQLite's integers nor makes a stream id Redis refuses."""
    if isinstance(after_seq, bool) or not isinstance(after_seq, int):
        raise InvalidStoreInput(f"after_seq must be an integer, got {after_seq!r}")
    return min(max(after_seq, 0), MAX_SEQ)


def check_rises(run_id: str, seqs: Sequence[int], last_seq: int) -> None:
    """Refuse a batch whose first number is not above the stored log's last."""
    if seqs and seqs[0] <= last_seq:
        raise SeqConflict(f"run {run_id}: event seq {seqs[0]} is not above the stored last seq {last_seq}")


def decode_json(text: str | bytes) -> dict[str, Any]:
    """A stored message or event back as a dict."""
    value: dict[str, Any] = json.loads(text)
    return value


def purge_interval(event_ttl: float) -> float:
    """How often a store sweeps expired event logs away: every minute, or every ``event_ttl`` if shorter."""
    return min(event_ttl, 60.0)


def encode_event(event: EventDict) -> str:
    """An event's stored text: the very text it went on the wire as (a run's :class:`~yao_actors.events.WireEvent`
    is encoded once, for both), or the same encoding of any other event dict."""
    return encoded_event(event)


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


def encode_approvals(approvals: Sequence[Mapping[str, Any]]) -> str:
    """A thread's pending approvals as one compact JSON array; refuses anything but JSON objects."""
    for index, approval in enumerate(approvals):
        if not isinstance(approval, Mapping):
            raise InvalidStoreInput(
                f"approvals[{index}]: a stored approval must be a JSON object, got {approval!r:.200}"
            )
    try:
        return json.dumps([dict(a) for a in approvals], separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise InvalidStoreInput(f"approvals: not JSON: {error}") from None


def decode_approvals(text: str | bytes | None) -> list[dict[str, Any]]:
    """Stored pending approvals back as dicts (``[]`` for none)."""
    if not text:
        return []
    value: list[dict[str, Any]] = json.loads(text)
    return value
