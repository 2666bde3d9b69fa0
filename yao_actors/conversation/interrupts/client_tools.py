"""Client-side tools (AG-UI "frontend tools"): tools a run's client offers and runs itself.

A run may carry tools of its client (``RunAgentInput.tools``). They are offered to the model after the
assistant's own tools; a name that collides with one of those is refused before the run starts
(:func:`check_client_tools`, ``RunError`` ``bad_request``). When the model calls one, the call is not
dispatched: the batch's other calls run, and the run ends with ``RUN_FINISHED`` outcome ``success`` and
``pendingToolCallIds`` (:class:`CallsPending`). The client runs the tool and starts the next run with
the tool message; the loop goes on from there.

A call left without a result — the next run brought no tool message for it — would leave the history invalid
for the model, so that run first answers it (:func:`answer_dangling_calls`). A tool message in a run's input
must answer a call still open in the thread, or the run is ``bad_request`` (:func:`check_tool_answers`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

from yao_actors.errors import RunError, RunErrorCode
from yao_actors.models.base import Message, ToolCall

#: What the model is told about a call of a client tool whose result never came.
NO_CLIENT_RESULT: Final = "Error: the client did not return a result for this call"


class CallsPending(Exception):
    """The run ends here: calls of client tools wait for the client, calls held for approval for a person.

    ``call_ids`` are the client tools' calls; ``held`` the :class:`~yao_actors.conversation.interrupts.approvals.PendingApproval`
    records of the calls held.
    """

    def __init__(self, call_ids: Sequence[str], held: Sequence[Any] = ()) -> None:
        super().__init__(f"waiting for {len(call_ids)} client result(s) and {len(held)} approval(s)")
        self.call_ids = tuple(call_ids)
        self.held = tuple(held)


def tool_name(tool: Mapping[str, Any]) -> str:
    """The name of a function tool (``{"type": "function", "function": {"name", ...}}``)."""
    function = tool.get("function")
    return str(function.get("name", "")) if isinstance(function, Mapping) else ""


def check_client_tools(client_tools: Sequence[Mapping[str, Any]], offered: Sequence[Mapping[str, Any]]) -> None:
    """Refuse client tools whose names collide with each other or with the assistant's tools (``bad_request``)."""
    taken = {tool_name(tool) for tool in offered}
    seen: set[str] = set()
    for index, tool in enumerate(client_tools):
        name = tool_name(tool)
        if name in taken:
            raise RunError(
                f"tools[{index}].name: {name!r} collides with a tool of the assistant's servers; rename the client tool",
                code=RunErrorCode.BAD_REQUEST,
            )
        if name in seen:
            raise RunError(f"tools[{index}].name: {name!r} is given twice", code=RunErrorCode.BAD_REQUEST)
        seen.add(name)


def split_calls(calls: Sequence[ToolCall], client_names: frozenset[str]) -> tuple[list[ToolCall], list[ToolCall]]:
    """A batch's calls: those the runtime dispatches, and those of client tools, each in the model's order."""
    if not client_names:  # a run without client tools (the usual case)
        return list(calls), []
    ours = [call for call in calls if call.name not in client_names]
    theirs = [call for call in calls if call.name in client_names]
    return ours, theirs


def open_calls(messages: Sequence[Message]) -> list[str]:
    """The ids of the last assistant message's tool calls that no tool message after it answers, in order."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "assistant":
            answered = {m.get("tool_call_id") for m in messages[index + 1 :] if m.get("role") == "tool"}
            return [c["id"] for c in message.get("tool_calls") or () if c.get("id") not in answered]
    return []


def check_tool_answers(history: Sequence[Message], messages: Sequence[Message], held: Collection[str] = ()) -> None:
    """Every tool message of a run's input answers a call still open in the thread, once (else ``bad_request``).

    ``held`` are calls waiting for a person's approval: only a ``resume`` answers those.
    """
    waiting = set(open_calls(history)) - set(held)
    for index, message in enumerate(messages):
        if message.get("role") != "tool":
            continue
        call_id = message.get("tool_call_id")
        if call_id not in waiting:
            raise RunError(
                f"messages[{index}]: a tool message for {call_id!r}, which is not a call waiting for a result",
                code=RunErrorCode.BAD_REQUEST,
            )
        waiting.discard(call_id)


def answer_dangling_calls(history: Sequence[Message], messages: Sequence[Message]) -> list[Message]:
    """Tool messages for the thread's open calls that the run's input does not answer (the model is told so)."""
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    return [
        {"role": "tool", "tool_call_id": call_id, "content": NO_CLIENT_RESULT}
        for call_id in open_calls(history)
        if call_id not in answered
    ]
