"""Taking up a run a dead process left waiting on a task: the turn rebuilt from its event log (fast tests; the
processes that die and take runs up are tests/integration/test_task_durability.py)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from yao_actors.conversation.durable.task_resume import answered_in, pending_turn, readable_tasks, serve_task_resumes
from yao_actors.errors import RunErrorCode
from yao_actors.models.base import ToolCall
from yao_actors.store.task_handle import TaskDesign, TaskHandle
from yao_actors.store.tasks import decode_handle, encode_handle


def events(*given: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**event, "seq": seq} for seq, event in enumerate(given, start=1)]


FIRST_STEP = (
    {"type": "RUN_STARTED"},
    {"type": "STEP_STARTED", "stepName": "model"},
    {"type": "TOOL_CALL_START", "toolCallId": "old", "toolCallName": "x__y"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "old", "delta": "{}"},
    {"type": "TOOL_CALL_END", "toolCallId": "old"},
    {"type": "STEP_FINISHED", "stepName": "model"},
    {"type": "TOOL_CALL_RESULT", "toolCallId": "old", "content": "done before"},
)


def test_the_last_step_s_text_and_calls_make_the_assistant_message() -> None:
    turn = pending_turn(
        events(
            *FIRST_STEP,
            {"type": "STEP_STARTED", "stepName": "model"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "我来"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "查一下"},
            {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "tasks__research"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"q": '},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '"北京"}'},
            {"type": "TOOL_CALL_START", "toolCallId": "c2", "toolCallName": "echo__echo"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c2", "delta": '{"text": "a"}'},
            {"type": "STEP_FINISHED", "stepName": "model"},
            {"type": "TOOL_CALL_RESULT", "toolCallId": "c2", "content": '{"text": "a"}'},
            {"type": "CUSTOM", "name": "tool_progress", "value": {"toolCallId": "c1", "message": "step 1"}},
        )
    )
    assert turn is not None
    assert turn.calls == (
        ToolCall("c1", "tasks__research", '{"q": "北京"}'),
        ToolCall("c2", "echo__echo", '{"text": "a"}'),
    )
    assert turn.message == {
        "role": "assistant",
        "content": "我来查一下",
        "tool_calls": [call.to_message() for call in turn.calls],
    }
    assert turn.answered == {"c2": '{"text": "a"}'}  # the call that ended before the crash keeps its result


def test_a_last_step_without_a_tool_call_is_no_turn_to_take_up() -> None:
    answered = events(*FIRST_STEP, {"type": "STEP_STARTED"}, {"type": "TEXT_MESSAGE_CONTENT", "delta": "ok"})
    assert pending_turn(answered) is None
    assert pending_turn([]) is None


def test_a_history_that_answers_a_call_already_is_found() -> None:
    history = [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "c1", "content": "r"}]
    assert answered_in(history, {"c1", "c9"})
    assert not answered_in(history, {"c9"})


class Leases:
    """Three runs left unleased: one whose task record is corrupt, one whose taking up fails, one well."""

    async def unleased_running_runs(self, owner: str) -> list[tuple[str, str]]:
        await trio.lowlevel.checkpoint()
        return [("bad-record", "t1"), ("bad-adopt", "t2"), ("good", "t3")]


class Records:
    async def for_run(self, run_id: str) -> list[TaskHandle]:
        await trio.lowlevel.checkpoint()
        if run_id == "bad-record":
            return [decode_handle("{oops", thread_id="t1", task_id="task-9")]
        return [TaskHandle("s", "task-1", TaskDesign.EXTENSION, "c", "tool", {}, run_id, "t", 1.0, 2.0)]


async def test_the_taking_up_of_runs_survives_a_corrupt_record_and_a_failing_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adopted: list[str] = []
    looks = trio.Semaphore(0)

    async def adopt(run_id: str, thread_id: str) -> None:
        await trio.lowlevel.checkpoint()
        adopted.append(run_id)
        if run_id == "bad-adopt":
            raise RuntimeError("the run's actor broke")
        if run_id == "good":
            looks.release()

    records: Any = Records()
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_task_resumes, Leases(), records, "me", 1.0, adopt)
        for _ in range(2):  # two looks: the loop went on after the failures of the first
            await looks.acquire()
        nursery.cancel_scope.cancel()
    # The corrupt record's run is taken up all the same: the taken-up run sets the record aside and closes.
    assert adopted == ["bad-record", "bad-adopt", "good"] * 2
    said = [r.getMessage() for r in caplog.records]
    assert any("bad-record" in line and "t1" in line and "task-9" in line for line in said), said
    assert any("bad-adopt" in line and "could not be taken up" in line for line in said), said


class Store:
    """A store whose run ``r1`` of thread ``t1`` has one unreadable task record and one good one."""

    def __init__(self) -> None:
        good = TaskHandle("s", "task-1", TaskDesign.EXTENSION, "c", "tool", {}, "r1", "t1", 1.0, 2.0)
        self.kept: dict[str, str] = {"task-0": '{"design": "x"}', "task-1": encode_handle(good)}

    def tasks(self) -> Store:
        return self

    async def for_run(self, run_id: str) -> list[TaskHandle]:
        await trio.lowlevel.checkpoint()
        return [decode_handle(text, thread_id="t1", task_id=key) for key, text in self.kept.items()]

    async def remove(self, thread_id: str, task_id: str) -> bool:
        await trio.lowlevel.checkpoint()
        return self.kept.pop(task_id, None) is not None


async def test_an_unreadable_record_is_set_aside_and_closes_its_run_saying_why() -> None:
    store: Any = Store()
    found, closing = await readable_tasks(store, "r1")
    assert [handle.task_id for handle in found] == ["task-1"]  # what reads back (its close-out removes it)
    assert list(store.kept) == ["task-1"]  # the unreadable record is gone from the store
    assert closing is not None
    assert closing.code is RunErrorCode.INTERRUPTED
    assert "r1" in str(closing)
    assert "'task-0'" in str(closing)
    assert "field 'server'" in str(closing)
    assert await readable_tasks(store, "r1") == (found, None)
