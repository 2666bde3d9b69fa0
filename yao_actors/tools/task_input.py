"""A 2026-07-28 task that waits for the user's input: its questions as an input round, and the answers back.

A task whose status is ``input_required`` carries ``inputRequests`` (by the server's key, each as a standalone
server-to-client request would be: an elicitation here). They become an
:class:`~yao_actors.tools.input_requests.InputRound`, the same interrupt a call's own questions become (checked by
the same rules: a question asking for more than flat fields is not put to the user); the run ends with the
interrupt, the task waits at the server. The round's ``request_state`` names the task (:func:`round_state`), so
the resume, made as any 2026-07-28 round's (the call again with the answers and that state), reaches the task:
the answers go to the server with ``tasks/update``, and the call goes on polling the same task.

That state comes back from the thread's record, not from a server, but a server could answer a plain call with
an ``InputRequiredResult`` whose ``requestState`` looks the same: what it names is only ever polled on that same
server, within the run's own wait (:func:`task_of_round`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Final

import mcp.types
import pydantic
import trio

from yao_actors.errors import ErrorKind
from yao_actors.store.task_handle import TaskDesign, TaskHandle
from yao_actors.tools.input_requests import (
    ASKS_THE_USER,
    InputAnswer,
    InputHandler,
    InputRound,
    elicit_result,
    input_round,
    too_many,
)
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.task_state import TaskState, poll_interval
from yao_actors.tools.tool_server import CallAnswers

logger = logging.getLogger(__name__)

#: What starts the ``request_state`` of a task's input round.
ROUND_PREFIX: Final = "yao-actors-task:"


def round_state(handle: TaskHandle) -> str:
    """The ``request_state`` of an input round of the task of ``handle``."""
    named = {"task": handle.task_id, "design": handle.design.value, "poll": handle.poll_interval}
    return ROUND_PREFIX + json.dumps(named)


def task_of_round(request_state: str | None) -> TaskState | None:
    """The task an input round's ``request_state`` names (as a working task, with its poll interval), or
    ``None`` when it names none."""
    if request_state is None or not request_state.startswith(ROUND_PREFIX):
        return None
    try:
        named = json.loads(request_state[len(ROUND_PREFIX) :])
    except ValueError:
        return None
    task = named.get("task") if isinstance(named, dict) else None
    design = named.get("design") if isinstance(named, dict) else None
    if not isinstance(task, str) or not task or design != TaskDesign.EXTENSION.value:
        return None
    poll = named.get("poll")
    interval = poll_interval(poll * 1000) if isinstance(poll, int | float) and not isinstance(poll, bool) else None
    return TaskState(task, TaskDesign.EXTENSION, "working", poll_interval=interval)


def input_outcome(handle: TaskHandle, state: TaskState) -> ToolOutcome:
    """The outcome of a call whose task asks the user: its round, or a ``tool_error`` saying why it cannot be
    one (a question refused, too many questions, a request this client does not answer, malformed requests)."""
    if (crowded := too_many(len(state.input_requests or {}))) is not None:  # before reading each of them
        return ToolOutcome(error=crowded, kind=ErrorKind.TOOL_ERROR)
    try:
        asked = mcp.types.InputRequiredResult.model_validate(
            {"inputRequests": dict(state.input_requests or {}), "requestState": round_state(handle)}, by_name=False
        )
    except pydantic.ValidationError as exc:
        reason = exc.errors(include_url=False, include_input=False)[0]["msg"]
        error = f"the task {handle.task_id!r} of tool {handle.tool!r} asks for input that cannot be read: {reason}"
        return ToolOutcome(error=error, kind=ErrorKind.TOOL_ERROR)
    round_ = input_round(handle.server, handle.tool, handle.arguments, asked)
    if isinstance(round_, str):
        return ToolOutcome(error=round_, kind=ErrorKind.TOOL_ERROR)
    return ToolOutcome(result=round_, error=ASKS_THE_USER, kind=ErrorKind.INPUT_REQUIRED)


def wire_responses(responses: Mapping[str, Any]) -> dict[str, Any]:
    """The user's answers as ``tasks/update`` carries them (``inputResponses``: JSON, by the server's key)."""
    return {
        key: value.model_dump(by_alias=True, mode="json", exclude_none=True)
        if isinstance(value, pydantic.BaseModel)
        else value
        for key, value in responses.items()
    }


def task_round(outcome: ToolOutcome) -> tuple[InputRound, TaskState] | None:
    """The input round of a 2026-07-28 task ``outcome`` asks, and the task, or ``None`` when it asks none."""
    round_ = outcome.result if outcome.kind is ErrorKind.INPUT_REQUIRED else None
    if not isinstance(round_, InputRound):
        return None
    task = task_of_round(round_.request_state)
    return None if task is None else (round_, task)


async def answer_in_process(handler: InputHandler, round_: InputRound, patience: float) -> CallAnswers:
    """The answers ``handler`` gives to a task's questions, one after another (each within ``patience`` seconds,
    then ``cancel``; a handler that fails cancels the question too), as a resume would give them."""
    responses: dict[str, Any] = {}
    for key, question in round_.questions:
        answer = InputAnswer("cancel")
        with trio.move_on_after(patience):
            try:
                answer = await handler(question)
            except Exception:
                logger.exception("server %r: the input handler failed", question.server)
        responses[key] = elicit_result(answer, question.schema)
    return CallAnswers(round_.arguments, responses, round_.request_state)
