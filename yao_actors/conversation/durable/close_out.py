"""The run's end as the journal sees it: values, not fields (:class:`Standing` before the close-out's write,
:class:`CloseOut` after it), and the store's own word on a run it had closed already.

The conversation actor reads these; it never reaches into the journal. A run another process took for dead
(its thread's lease expired) is closed in the store with ``RUN_ERROR`` ``interrupted``: its client then gets
that closing event (:func:`read_closing_events`), and the run's result says the same (:func:`closing_error`),
so the client and the stored log agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import trio

from yao_actors.errors import RunError, RunErrorCode, StoreUnavailable, UnknownRun, UnknownThread
from yao_actors.events import TERMINAL_TYPES, EventDict
from yao_actors.models.base import Message
from yao_actors.store import ConversationStore
from yao_actors.tasks import RETRY_DELAYS

CLOSE_PATIENCE = 10.0
"""Seconds the close-out's write (the terminal event and the run's record) is tried again while the store is out
of reach, before the terminal event is shown without being stored."""


def lost_thread(thread_id: str, error: UnknownThread | UnknownRun) -> StoreUnavailable:
    """The failure of a write to a thread (or run) the store no longer has: someone forgot it."""
    said = f"thread {thread_id!r} is no longer in the store ({error.args[0] if error.args else error})"
    return StoreUnavailable(said, shown=said)


@attrs.frozen
class Standing:
    """How a run's writes stand before its close-out's own write (:meth:`RunJournal.standing`)."""

    started: bool
    """The store recorded the run as started (by the journal's ``start``, or the lease's try that starts it)."""
    writable: bool
    """The store recorded the run as started and failed none of its writes: more of it may be written."""
    dropped: bool
    """The store failed after the run started, and keeps what outlives the process: the events it could not
    store were dropped (nobody saw them), so the run's close-out numbers on from the last event shown."""
    failure: RunError | None
    """Why the store failed the run (out of reach, or the thread gone), if it did: the ``RunError``
    ``store_unavailable`` the run ends with."""


@attrs.frozen
class CloseOut:
    """What a run's close-out came to (:meth:`RunJournal.close_out`): the events to show last, what the store
    says of how the run ended when that differs, and what of the run the store has."""

    events: tuple[EventDict, ...]
    """The events to show last, the terminal event last (none when :attr:`unstored`)."""
    unstored: RunError | None = None
    """The store stayed out of reach and took nothing of the close: the run ends with this error instead, its
    close-out's events shown without being stored (:meth:`RunJournal.unstored_ending`)."""
    closed_elsewhere: RunError | None = None
    """The store had the run closed already (another process took it for dead): how the closing event stored
    for it says it ended; :attr:`events` are the store's own, ending with that event."""
    stored: tuple[Message, ...] = ()
    """The run's messages the store has (the thread's copy in memory takes exactly these)."""
    sizes: tuple[int, ...] = ()
    """The measured size of each of :attr:`stored`."""
    in_step: bool = True
    """Every write of the run went through: the store holds all it added (else the thread's count of stored
    messages is no longer known)."""
    released: bool = False
    """The close-out's write gave the thread's lease up too (``release``)."""


async def read_closing_events(store: ConversationStore, run_id: str, after_seq: int) -> list[EventDict]:
    """The store's events of run ``run_id`` after ``after_seq`` (the last one shown) (ending with the closing event another process
    stored), read once the store answers, within :data:`CLOSE_PATIENCE`."""
    with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_PATIENCE):
        delays = iter(RETRY_DELAYS)
        while True:
            try:
                stored = await store.read_events(run_id, after_seq)
            except StoreUnavailable:
                await trio.sleep(next(delays, RETRY_DELAYS[-1]))
                continue
            if stored and stored[-1]["type"] in TERMINAL_TYPES:
                return stored
            break
    return []


def closing_error(events: Sequence[EventDict]) -> RunError:
    """How a run the store had closed already ended: the closing event stored for it (``RUN_ERROR``
    ``interrupted``, by the process that took it for dead)."""
    terminal = events[-1] if events else {}
    try:
        code = RunErrorCode(terminal.get("code", RunErrorCode.INTERRUPTED))
    except ValueError:
        code = RunErrorCode.INTERRUPTED
    return RunError(str(terminal.get("message", "the run was closed by another process")), code=code)
