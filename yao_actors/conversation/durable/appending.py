"""A run's write to the store, tried again while the store is out of reach (:func:`append_patiently`)."""

from __future__ import annotations

from collections.abc import Sequence

from yao_actors.errors import RunClosed, SeqConflict, StoreUnavailable
from yao_actors.events import EventDict, stored_events
from yao_actors.models.base import Message
from yao_actors.store import ConversationStore, RunFinish
from yao_actors.tasks import patiently


async def append_patiently(
    store: ConversationStore,
    thread_id: str,
    run_id: str,
    write: tuple[Sequence[Message], Sequence[EventDict], RunFinish | None],
    patience: float,
    release: str | None = None,
) -> Sequence[int] | None:
    """``append_turn`` of ``write`` (turns, events, the run's close or ``None``), tried again while the store is
    out of reach, up to ``patience`` seconds; with ``release`` and a close, ``append_last_turn``.

    A try whose answer was lost (the store wrote, the reply did not arrive) leaves the next try refused;
    that refusal is taken as success when the store's log holds this very batch.
    """
    turns, events, finish = write
    tries = 0
    encoded = stored_events(events)

    async def append() -> Sequence[int] | None:
        nonlocal tries
        tries += 1
        if release is None or finish is None:
            return await store.append_turn(thread_id, run_id, turns, encoded, finish=finish)
        return await store.append_last_turn(thread_id, run_id, turns, encoded, finish, release=release)

    try:
        return await patiently(append, patience)
    except (RunClosed, SeqConflict):
        if tries > 1 and events and await _landed(store, run_id, events):
            return None
        raise


async def _landed(store: ConversationStore, run_id: str, events: Sequence[EventDict]) -> bool:
    """Whether the store's log ends with ``events`` (an earlier try of this write got through)."""
    try:
        stored = await store.read_events(run_id, events[0]["seq"] - 1)
    except StoreUnavailable:
        return False
    return [(e["seq"], e["type"]) for e in stored] == [(e["seq"], e["type"]) for e in events]
