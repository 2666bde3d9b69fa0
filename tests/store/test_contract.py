"""The ConversationStore contract, run against every backend (memory, SQLite in tmp_path, a real redis-server)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests.store.conftest import Clock
from yao_actors.errors import InvalidStoreInput, RunClosed, RunIdTaken, SeqConflict, UnknownRun, UnknownThread
from yao_actors.events import stored_events
from yao_actors.history_budget import message_bytes
from yao_actors.store import (
    ANY_PRINCIPAL,
    ConversationStore,
    EncodedEvent,
    MemoryStore,
    RunFinish,
    RunStatus,
    StoreSpec,
    open_store,
)

GUARD = 10.0
"""Seconds any one test may take with real I/O before it fails instead of hanging."""

TURN: list[dict[str, Any]] = [
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "weather__get", "arguments": '{"city": "北京"}'}},
            {"id": "c2", "type": "function", "function": {"name": "weather__get", "arguments": '{"city": "Paris"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 3}'},
    {"role": "tool", "tool_call_id": "c2", "content": '{"temp": 9}'},
    {"role": "assistant", "content": "Wear a coat in 北京."},
]


def events(*seqs: int, run_id: str = "r1") -> list[dict[str, Any]]:
    return [{"type": "STEP_STARTED", "stepName": f"step {s}", "runId": run_id, "seq": s, "timestamp": s} for s in seqs]


async def test_open_thread_creates_once_and_keeps_its_owner(store: ConversationStore) -> None:
    with trio.fail_after(GUARD):
        assert await store.get_thread("t1") is None
        created = await store.open_thread("t1", "alice")
        assert (created.thread_id, created.principal, created.created) == ("t1", "alice", True)
        assert created.created_at.tzinfo is not None
        again = await store.open_thread("t1", "bob")
        assert (again.principal, again.created) == ("alice", False)
        assert again.created_at == created.created_at
        assert await store.get_thread("t1") == again
        assert (await store.open_thread("t2", None)).principal is None


async def test_history_round_trips_the_seed_message_shapes(store: ConversationStore) -> None:
    with trio.fail_after(GUARD):
        assert await store.load_history("nobody") == []
        await store.open_thread("t1", None)
        await store.append_messages("t1", [{"role": "user", "content": "北京天气?"}])
        await store.append_messages("t1", TURN)
        assert await store.load_history("t1") == [{"role": "user", "content": "北京天气?"}, *TURN]


async def test_a_refused_turn_writes_nothing(store: ConversationStore) -> None:
    with trio.fail_after(GUARD):
        await store.open_thread("t1", None)
        await store.append_messages("t1", TURN[:1] + TURN[1:3])
        with pytest.raises(InvalidStoreInput, match="string 'role'"):
            await store.append_messages("t1", [TURN[3], {"content": "no role"}])
        with pytest.raises(UnknownThread, match="not opened"):
            await store.append_messages("unopened", TURN)
        assert await store.load_history("t1") == TURN[:3]
        assert await store.get_thread("unopened") is None


async def test_list_threads_newest_first_by_owner(store: ConversationStore) -> None:
    with trio.fail_after(GUARD):
        for thread_id, principal in [("a1", "alice"), ("n1", None), ("b1", "bob"), ("a2", "alice")]:
            await store.open_thread(thread_id, principal)
        assert [t.thread_id for t in await store.list_threads()] == ["a2", "b1", "n1", "a1"]
        assert [t.thread_id for t in await store.list_threads(ANY_PRINCIPAL, limit=2)] == ["a2", "b1"]
        assert [t.thread_id for t in await store.list_threads("alice")] == ["a2", "a1"]
        assert [t.thread_id for t in await store.list_threads(None)] == ["n1"]
        assert await store.list_threads("carol") == []


async def test_a_run_records_its_input_at_start_and_its_end_at_finish(store: ConversationStore) -> None:
    with trio.fail_after(GUARD):
        await store.open_thread("t1", "alice")
        question = [{"role": "user", "content": "weather?"}]
        started = await store.start_run("t1", "r1", "default", question)
        assert started.status is RunStatus.RUNNING
        assert started.owner == store.owner
        assert await store.load_history("t1") == question
        assert await store.get_run("r1") == started
        with pytest.raises(RunIdTaken, match="already stored"):
            await store.start_run("t1", "r1", "default", question)
        assert await store.load_history("t1") == question

        usage = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
        assert await store.finish_run("r1", status=RunStatus.FINISHED, outcome="answered", usage=usage)
        assert not await store.finish_run("r1", status=RunStatus.FAILED, outcome="error")
        assert not await store.finish_run("unknown", status=RunStatus.FAILED, outcome="error")
        finished = await store.get_run("r1")
        assert finished is not None
        assert (finished.status, finished.outcome, dict(finished.usage)) == (RunStatus.FINISHED, "answered", usage)
        assert finished.finished_at is not None
        assert finished.finished_at > finished.started_at

        await store.start_run("t1", "r2", "helper", [{"role": "user", "content": "and tomorrow?"}])
        wire = [run.to_wire() for run in await store.list_runs("t1")]
        assert [w["runId"] for w in wire] == ["r1", "r2"]
        assert wire[0]["outcome"] == "answered"
        assert wire[0]["usage"] == usage
        assert wire[1] == {
            "runId": "r2",
            "assistant": "helper",
            "outcome": None,
            "startedAt": wire[1]["startedAt"],
            "finishedAt": None,
            "usage": {},
        }
        assert datetime.datetime.fromisoformat(wire[0]["finishedAt"]) > datetime.datetime.fromisoformat(
            wire[0]["startedAt"]
        )
        assert await store.get_run("unknown") is None
        assert await store.list_runs("unknown") == []


async def test_events_are_appended_in_batches_and_read_after_a_seq(store: ConversationStore) -> None:
    with trio.fail_after(GUARD):
        await store.open_thread("t1", None)
        await store.start_run("t1", "r1", "default", [])
        assert await store.read_events("r1") == []
        await store.append_events("r1", stored_events(events(1, 2, 3)))
        await store.append_events("r1", stored_events(events(4)))
        await store.append_events("r1", [])
        assert await store.read_events("r1") == events(1, 2, 3, 4)
        assert await store.read_events("r1", 2) == events(3, 4)
        assert await store.read_events("r1", 4) == []
        assert await store.read_events("unknown") == []


async def test_a_follower_waiting_for_events_wakes_when_one_is_appended(store: ConversationStore) -> None:
    # How resume follows a run going on in another process. Redis blocks on the stream (XREAD BLOCK) until the
    # append, on a connection of its own; the others come back after a poll interval, with or without events.
    woke: list[list[dict[str, Any]]] = []
    waits = 0

    async def follow() -> None:
        nonlocal waits
        while not (new := await store.read_events("r1", 1)):
            waits += 1
            await store.wait_events("r1", 1, 60)
        woke.append(new)

    with trio.fail_after(GUARD):  # the 60 s wait must end with the append, long before the guard
        await store.open_thread("t1", None)
        await store.start_run("t1", "r1", "default", [])
        await store.append_events("r1", stored_events(events(1)))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            while not waits:  # noqa: ASYNC110 (the follower is about to wait)
                await trio.sleep(0.01)
            await trio.testing.wait_all_tasks_blocked()  # and is waiting now (on the store's socket or clock)
            assert woke == []
            # The store's other calls are not held up by the blocked reader.
            assert (await store.get_run("r1")) is not None
            await store.append_events("r1", stored_events(events(2)))
    assert woke == [events(2)]
    if type(store).__name__ == "RedisStore":
        assert waits == 1  # one blocking read, woken by the append (not a poll loop)


async def test_a_refused_event_batch_writes_nothing(store: ConversationStore) -> None:
    with trio.fail_after(GUARD):
        await store.open_thread("t1", None)
        await store.start_run("t1", "r1", "default", [])
        await store.append_events("r1", stored_events(events(1, 2)))
        with pytest.raises(SeqConflict, match="not above the stored last seq 2"):
            await store.append_events("r1", stored_events(events(2, 3)))
        with pytest.raises(SeqConflict, match="does not rise"):
            await store.append_events("r1", stored_events(events(3, 5, 4)))
        with pytest.raises(InvalidStoreInput, match="positive integer"):
            await store.append_events("r1", [EncodedEvent(None, '{"type":"CUSTOM"}')])  # type: ignore[arg-type]
        with pytest.raises(UnknownRun, match="not stored"):
            await store.append_events("unknown", stored_events(events(1)))
        assert await store.read_events("r1") == events(1, 2)


async def test_a_turn_and_its_events_are_written_together(store: ConversationStore) -> None:
    with trio.fail_after(GUARD):
        question = {"role": "user", "content": "北京今天适合穿什么?"}
        await store.open_thread("t1", "alice")
        await store.start_run("t1", "r1", "default", [question])
        sizes = await store.append_turn("t1", "r1", TURN[:3], stored_events(events(1, 2)))
        await store.append_turn("t1", "r1", [], stored_events(events(3)))
        await store.append_turn("t1", "r1", TURN[3:], [])
        await store.append_turn("t1", "r1", [], [])
        assert await store.load_history("t1") == [question, *TURN]
        # Sizes the store measured, if it says: each message's own (its caller takes them instead of measuring).
        assert sizes is None or list(sizes) == [message_bytes(m) for m in TURN[:3]]
        if isinstance(store, MemoryStore):  # it measures them for its budget
            assert sizes is not None
        assert await store.read_events("r1") == events(1, 2, 3)
        assert await store.read_events("r1", 2) == events(3)
        await store.append_events("r1", stored_events(events(4)))  # the two ways of appending events share one log
        assert await store.read_events("r1", 3) == events(4)
        # Line breaks in text (Redis passes a turn's messages and events one a line) and a long turn.
        lines = {"role": "assistant", "content": "第一行\n第二行\r\n\n"}
        many = [{"role": "tool", "tool_call_id": f"c{i}", "content": f"{i}\n"} for i in range(1500)]
        delta = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "a\nb\n", "runId": "r1", "seq": 5}
        await store.append_turn("t1", "r1", [lines, *many], stored_events([delta, *events(*range(6, 1506))]))
        assert (await store.load_history("t1"))[5:] == [lines, *many]
        assert await store.read_events("r1", 4) == [delta, *events(*range(6, 1506))]


async def test_the_last_turn_closes_the_run_in_the_same_write_and_a_closed_run_takes_nothing_more(
    store: ConversationStore,
) -> None:
    with trio.fail_after(GUARD):
        await store.open_thread("t1", "alice")
        await store.start_run("t1", "r1", "default", [{"role": "user", "content": "北京?"}])
        await store.append_turn("t1", "r1", TURN[:3], stored_events(events(1, 2)))
        finish = RunFinish(RunStatus.FINISHED, "answered", {"total_tokens": 7})
        await store.append_turn("t1", "r1", TURN[3:], stored_events(events(3)), finish=finish)
        run = await store.get_run("r1")
        assert run is not None
        assert (run.status, run.outcome, dict(run.usage)) == (RunStatus.FINISHED, "answered", {"total_tokens": 7})
        assert run.finished_at is not None
        assert await store.read_events("r1") == events(1, 2, 3)
        with pytest.raises(RunClosed, match="closed already"):
            await store.append_turn("t1", "r1", [{"role": "assistant", "content": "late"}], stored_events(events(4)))
        with pytest.raises(RunClosed):
            await store.append_turn("t1", "r1", [], [], finish=finish)
        assert len(await store.load_history("t1")) == 5
        assert await store.read_events("r1") == events(1, 2, 3)
        # A run another process closed (as a sweep closes a dead one) takes nothing more either.
        await store.start_run("t1", "r2", "default", [])
        assert await store.finish_run("r2", status=RunStatus.INTERRUPTED, outcome="interrupted")
        with pytest.raises(RunClosed, match="interrupted"):
            await store.append_turn("t1", "r2", [], stored_events(events(1, run_id="r2")))
        # Only a close: no messages, no events.
        await store.start_run("t1", "r3", "default", [])
        await store.append_turn("t1", "r3", [], [], finish=RunFinish(RunStatus.FAILED, "error"))
        closed = await store.get_run("r3")
        assert closed is not None
        assert (closed.status, closed.outcome) == (RunStatus.FAILED, "error")


async def test_a_refused_turn_writes_neither_its_messages_nor_its_events(store: ConversationStore) -> None:
    with trio.fail_after(GUARD):
        await store.open_thread("t1", None)
        await store.start_run("t1", "r1", "default", [])
        await store.open_thread("t2", None)
        await store.start_run("t2", "r2", "default", [])
        await store.append_turn("t1", "r1", TURN[:3], stored_events(events(1, 2)))
        with pytest.raises(SeqConflict, match="not above the stored last seq 2"):
            await store.append_turn("t1", "r1", TURN[3:], stored_events(events(2, 3)))
        with pytest.raises(SeqConflict, match="does not rise"):
            await store.append_turn("t1", "r1", TURN[3:], stored_events(events(3, 5, 4)))
        with pytest.raises(InvalidStoreInput, match="string 'role'"):
            await store.append_turn("t1", "r1", [TURN[3], {"content": "no role"}], stored_events(events(3)))
        with pytest.raises(UnknownThread, match="not opened"):
            await store.append_turn("unopened", "r1", TURN[3:], stored_events(events(3)))
        with pytest.raises(UnknownRun, match="not stored"):
            await store.append_turn("t1", "unknown", TURN[3:], stored_events(events(3)))
        with pytest.raises(UnknownRun, match="not stored on thread 't1'"):
            await store.append_turn("t1", "r2", TURN[3:], stored_events(events(3, run_id="r2")))
        assert await store.load_history("t1") == TURN[:3]
        assert await store.read_events("r1") == events(1, 2)
        assert await store.load_history("t2") == []
        assert await store.read_events("r2") == []
        assert await store.get_thread("unopened") is None


async def test_forget_deletes_the_thread_its_runs_and_their_events(store: ConversationStore) -> None:
    with trio.fail_after(GUARD):
        for thread_id in ("t1", "t2"):
            await store.open_thread(thread_id, "alice")
            await store.start_run(thread_id, f"{thread_id}-run", "default", [{"role": "user", "content": "hi"}])
            await store.append_events(f"{thread_id}-run", stored_events(events(1, run_id=f"{thread_id}-run")))
        assert await store.forget_thread("t1")
        assert not await store.forget_thread("t1")
        assert await store.get_thread("t1") is None
        assert await store.load_history("t1") == []
        assert await store.list_runs("t1") == []
        assert await store.get_run("t1-run") is None
        assert await store.read_events("t1-run") == []
        assert [t.thread_id for t in await store.list_threads("alice")] == ["t2"]
        assert len(await store.read_events("t2-run")) == 1
        # The id is free again, and recovery no longer sees the forgotten run.
        assert (await store.open_thread("t1", "bob")).principal == "bob"
        assert await store.load_history("t1") == []


@pytest.mark.parametrize("kind", ["memory", "sqlite"])  # Redis expires on its own clock: test_redis_event_logs_expire
async def test_a_finished_runs_events_stay_for_event_ttl_after_its_last_event(
    kind: str, tmp_path: Path, clock: Clock
) -> None:
    spec = StoreSpec("memory") if kind == "memory" else StoreSpec.sqlite(tmp_path / "conversations.sqlite3")
    with trio.fail_after(GUARD):
        async with open_store(spec, clock=clock) as store:
            await store.open_thread("t1", None)
            await store.start_run("t1", "r1", "default", [])
            await store.append_events("r1", stored_events(events(1)))
            clock.advance(store.event_ttl - 1)
            await store.append_events("r1", stored_events(events(2)))
            clock.advance(store.event_ttl - 1)
            assert [e["seq"] for e in await store.read_events("r1")] == [1, 2]
            clock.advance(2)
            assert await store.read_events("r1") == []
            assert await store.get_run("r1") is not None  # the run outlives its log


def _durable_spec(kind: str, request: pytest.FixtureRequest) -> StoreSpec:
    tmp_path = request.getfixturevalue("tmp_path")
    if kind == "sqlite":
        return StoreSpec.sqlite(tmp_path / "conversations.sqlite3")
    server = request.getfixturevalue("redis_server")
    return StoreSpec("redis", url=server.url, prefix=f"recovery-{id(request)}:")


def approval(call_id: str, city: str) -> dict[str, Any]:
    """A pending approval as the conversation actor keeps it (``PendingApproval.to_record``)."""
    call = {"id": call_id, "name": "weather__get", "arguments": f'{{"city": "{city}"}}'}
    return {"interruptId": f"approval-{call_id}", "call": call, "expiresAt": 1_800_003_600.5}


async def test_pending_approvals_are_replaced_cleared_and_forgotten_with_their_thread(store: ConversationStore) -> None:
    with trio.fail_after(GUARD):
        assert await store.load_approvals("nobody") == []
        with pytest.raises(UnknownThread, match="not opened"):
            await store.save_approvals("nobody", [approval("c1", "北京")])
        await store.open_thread("t1", "alice")
        await store.open_thread("t2", "alice")
        await store.save_approvals("t1", [approval("c1", "北京"), approval("c2", "Paris")])
        loaded = await store.load_approvals("t1")
        assert loaded == [approval("c1", "北京"), approval("c2", "Paris")]  # in order, non-ASCII intact
        assert await store.load_approvals("t2") == []
        loaded[0]["call"]["name"] = "changed"  # what a caller holds is its own copy
        assert (await store.load_approvals("t1"))[0] == approval("c1", "北京")
        # A refused save writes nothing.
        with pytest.raises(InvalidStoreInput, match=r"approvals\[1\]: a stored approval must be a JSON object"):
            await store.save_approvals("t1", [approval("c3", "Rome"), "approval-c3"])  # type: ignore[list-item]
        with pytest.raises(InvalidStoreInput, match="not JSON"):
            await store.save_approvals("t1", [{"interruptId": "x", "call": object()}])
        assert [a["interruptId"] for a in await store.load_approvals("t1")] == ["approval-c1", "approval-c2"]
        # A save replaces; an empty one clears.
        await store.save_approvals("t1", [approval("c3", "Rome")])
        assert await store.load_approvals("t1") == [approval("c3", "Rome")]
        await store.save_approvals("t1", [])
        assert await store.load_approvals("t1") == []
        await store.save_approvals("t1", [])  # clearing nothing is fine
        # They go with their thread, and a thread opened again under the id starts without any.
        await store.save_approvals("t1", [approval("c4", "Oslo")])
        await store.save_approvals("t2", [approval("c5", "Lima")])
        assert await store.forget_thread("t1")
        assert await store.load_approvals("t1") == []
        await store.open_thread("t1", "bob")
        assert await store.load_approvals("t1") == []
        assert await store.load_approvals("t2") == [approval("c5", "Lima")]


@pytest.mark.parametrize("durable", ["sqlite", "redis"])
async def test_pending_approvals_survive_reopening_the_store(
    durable: str, request: pytest.FixtureRequest, clock: Clock
) -> None:
    spec = _durable_spec(durable, request)
    with trio.fail_after(GUARD):
        async with open_store(spec, clock=clock) as before:
            await before.open_thread("t1", "alice")
            await before.start_run("t1", "r1", "default", [{"role": "user", "content": "北京天气?"}])
            await before.save_approvals("t1", [approval("c1", "北京")])
            await before.finish_run("r1", status=RunStatus.FINISHED, outcome="interrupt")
        async with open_store(spec, clock=clock) as after:
            assert await after.load_approvals("t1") == [approval("c1", "北京")]
            await after.save_approvals("t1", [])
        async with open_store(spec, clock=clock) as again:
            assert await again.load_approvals("t1") == []


async def test_ids_holding_key_separators_name_only_themselves(store: ConversationStore) -> None:
    """Issue 29: thread ``x:messages`` and run ``r:events`` are not parts of thread ``x`` and run ``r`` (nor the
    other way round), whichever comes first, and forgetting one leaves the other."""
    pairs = [("x:messages", "r:events"), ("x", "r"), ("x:runs", "r%3Aevents"), ("x:lease", "r%"), ("%", "r:")]
    with trio.fail_after(GUARD):
        for index, (thread_id, run_id) in enumerate(pairs):
            await store.open_thread(thread_id, f"p{index}")
            await store.start_run(thread_id, run_id, "default", [{"role": "user", "content": thread_id}])
            await store.append_turn(
                thread_id, run_id, [{"role": "assistant", "content": run_id}], stored_events(events(1, 2))
            )
            assert await store.finish_run(run_id, status=RunStatus.FINISHED, outcome="answered")
        for index, (thread_id, run_id) in enumerate(pairs):
            assert (await store.get_thread(thread_id)).principal == f"p{index}"  # type: ignore[union-attr]
            assert [t.thread_id for t in await store.list_threads(f"p{index}")] == [thread_id]
            assert await store.load_history(thread_id) == [
                {"role": "user", "content": thread_id},
                {"role": "assistant", "content": run_id},
            ]
            assert [r.run_id for r in await store.list_runs(thread_id)] == [run_id]
            assert (await store.get_run(run_id)).thread_id == thread_id  # type: ignore[union-attr]
            assert [e["seq"] for e in await store.read_events(run_id)] == [1, 2]
        assert await store.forget_thread("x:messages")
        assert await store.get_run("r:events") is None
        assert await store.read_events("r:events") == []
        assert len(await store.load_history("x")) == 2
        assert [e["seq"] for e in await store.read_events("r")] == [1, 2]
