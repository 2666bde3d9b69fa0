"""Taking up a run a dead process left waiting on a task: the turn rebuilt from its event log (fast tests; the
processes that die and take runs up are tests/integration/test_task_durability.py)."""

from __future__ import annotations

from typing import Any

from yao_actors.conversation.durable.task_resume import answered_in, pending_turn
from yao_actors.models.base import ToolCall


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
