"""The run journal's start folded into the lease's take (``RunJournal.starting``): a try whose answer was lost
counts the stored run as this one's, a run id stored already is refused with nothing written, and a thread gone
from the store fails the run ``store_unavailable``."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from yao_actors.conversation.durable.journal import RunJournal
from yao_actors.conversation.streaming.outlet import RunOutlet
from yao_actors.errors import RunError, RunErrorCode, StoreUnavailable
from yao_actors.store import MemoryStore, RunStart, Taken

QUESTION = {"role": "user", "content": "北京天气?"}


async def test_a_lost_answer_of_a_folded_start_counts_as_started(autojump_clock: trio.testing.MockClock) -> None:
    store = MemoryStore()
    await store.open_thread("t", None)
    calls: list[Taken | str] = []

    async def losing(thread_id: str, token: str, ttl: float, start: RunStart) -> Taken:
        taken = await store.take_and_start(thread_id, token, ttl, start)  # raises RunIdTaken on the second try
        calls.append(taken)
        if len(calls) == 1:
            raise StoreUnavailable("the store wrote, and the answer was lost")
        return taken

    journal = RunJournal(store, "t", "r", RunOutlet(), durable=False)
    taken = await journal.starting(losing, "p:r", 30, "a", [QUESTION], 0)()
    assert (taken.taken, taken.started) == (True, True)
    assert journal.standing().started
    assert journal.stored == (QUESTION,)
    assert journal.transcript == [QUESTION]
    assert len(calls) == 1  # the second try was refused for its id: the stored run is this one's
    assert await store.load_history("t") == [QUESTION]


async def test_a_folded_start_of_a_stored_run_id_is_refused_and_writes_nothing() -> None:
    store = MemoryStore()
    await store.open_thread("t", None)
    await store.start_run("t", "r", "a", [QUESTION])
    journal = RunJournal(store, "t", "r", RunOutlet(), durable=False)
    with pytest.raises(RunError) as refused:
        await journal.starting(store.take_and_start, "p:r", 30, "a", [QUESTION], 1)()
    assert refused.value.code is RunErrorCode.BAD_REQUEST
    assert not journal.standing().started
    assert await store.load_history("t") == [QUESTION]
    assert (await store.leases().take("t", "q", 30)).taken  # no lease was left behind


async def test_a_folded_start_on_a_thread_gone_from_the_store_fails_store_unavailable() -> None:
    store = MemoryStore()
    journal = RunJournal(store, "gone", "r", RunOutlet(), durable=False)
    with pytest.raises(RunError) as failed:
        await journal.starting(store.take_and_start, "p:r", 30, "a", [QUESTION], 0)()
    assert failed.value.code is RunErrorCode.STORE_UNAVAILABLE
    assert journal.standing().failure is not None
    assert not journal.standing().started
