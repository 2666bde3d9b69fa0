"""Event numbers out of range (issue 29, defect 11): a ``resume`` with ``afterSeq`` ≥ 2⁶³ was ``internal_error`` (an
``OverflowError`` in SQLite). The frame refuses it as ``bad_request``; the stores take any integer themselves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from yao_actors.config import AssistantSpec, Config
from yao_actors.errors import FrameError, InvalidStoreInput, RunErrorCode
from yao_actors.events import stored_events
from yao_actors.models import FunctionModel
from yao_actors.runtime import open_runtime
from yao_actors.service.protocol import ResumeFrame, parse_frame
from yao_actors.specs import StoreSpec
from yao_actors.store import ConversationStore
from yao_actors.store.codec import MAX_SEQ

GUARD = 20.0
HUGE = [MAX_SEQ, MAX_SEQ + 1, 2**64, 2**64 + 1, 10**40]


def events(*seqs: int) -> list[dict[str, Any]]:
    return [{"type": "STEP_STARTED", "stepName": f"step {s}", "runId": "r1", "seq": s} for s in seqs]


@pytest.mark.parametrize("after", [MAX_SEQ + 1, 2**64, 10**40])
def test_a_resume_frame_past_the_largest_seq_is_a_bad_request_naming_the_field(after: int) -> None:
    message = json.dumps({"type": "resume", "runId": "r1", "afterSeq": after})
    with pytest.raises(FrameError) as refused:
        parse_frame(message, max_bytes=4096)
    assert refused.value.code is RunErrorCode.BAD_REQUEST
    assert str(refused.value).startswith(f"afterSeq: {after} is greater than the maximum of {MAX_SEQ}")
    edge = json.dumps({"type": "resume", "runId": "r1", "afterSeq": MAX_SEQ})
    assert parse_frame(edge, max_bytes=4096) == ResumeFrame("r1", MAX_SEQ)


async def test_a_store_reads_after_any_integer_and_refuses_anything_else(store: ConversationStore) -> None:
    with trio.fail_after(GUARD):
        await store.open_thread("t1", None)
        await store.start_run("t1", "r1", "default", [])
        await store.append_events("r1", stored_events(events(1, 2)))
        for after in HUGE:
            assert await store.read_events("r1", after) == []
            await store.wait_events("r1", after, 0.01)
        for after in (-1, -(2**70)):
            assert [e["seq"] for e in await store.read_events("r1", after)] == [1, 2]
        for after in (1.5, True, "1"):
            with pytest.raises(InvalidStoreInput, match="after_seq must be an integer"):
                await store.read_events("r1", after)  # type: ignore[arg-type]


async def test_a_store_refuses_an_event_past_the_largest_seq_and_writes_nothing(store: ConversationStore) -> None:
    with trio.fail_after(GUARD):
        await store.open_thread("t1", None)
        await store.start_run("t1", "r1", "default", [])
        for seq in (MAX_SEQ + 1, 2**64):
            with pytest.raises(
                InvalidStoreInput, match=rf"'seq' must be a positive integer up to {MAX_SEQ}, got {seq}"
            ):
                await store.append_events("r1", stored_events(events(1, seq)))
        await store.append_events("r1", stored_events(events(MAX_SEQ)))
        assert [e["seq"] for e in await store.read_events("r1")] == [MAX_SEQ]


@pytest.mark.parametrize("after", HUGE)
async def test_open_resume_after_any_seq_ends_with_the_terminal_event(tmp_path: Path, after: int) -> None:
    """A Python caller of ``runtime.open_resume`` gets the stored run's terminal event, never an OverflowError."""
    config = Config(assistants={"a": AssistantSpec("a", "m")}, store=StoreSpec.sqlite(tmp_path / "c.sqlite3"))
    with trio.fail_after(GUARD):
        async with open_runtime(config, models={"m": FunctionModel(lambda *_: "done")}) as runtime:
            async with runtime.open_run("a", "hello", thread_id="t1", run_id="r1") as stream:
                async for _ in stream:
                    pass
            async with runtime.open_resume("r1", after_seq=after) as resumed:
                replayed = [event async for event in resumed]
    assert [e["type"] for e in replayed] == ["RUN_FINISHED"]
    assert replayed[0]["seq"] == after + 1
