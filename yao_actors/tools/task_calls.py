"""One request about a task, made by a worker of a server actor (:class:`~yao_actors.tools.task_state.TaskOp`).

``tasks/get`` comes back as the task's state (:class:`~yao_actors.tools.task_state.TaskState` on the outcome's
``task``); once a 2026-07-28 task has ended the same answer carries its result (read as any ``tools/call``
result) or its JSON-RPC error; a 2025-11-25 task's result is asked for with ``tasks/result``, which also carries
the server's questions while the task waits for input (answered as a call's questions are). ``tasks/update``
and ``tasks/cancel`` are acknowledged. A JSON-RPC error, a lost connection, an unreadable answer: the same
outcomes as a ``tools/call``'s (:mod:`~yao_actors.tools.server_calls`).
"""

from __future__ import annotations

import logging
from typing import Any, Final

import mcp
import mcp.types
import mcp_types
import pydantic
import trio
from mcp.shared.exceptions import MCPError

from yao_actors.errors import ErrorKind
from yao_actors.specs import ServerSpec
from yao_actors.store.task_handle import TaskDesign
from yao_actors.tools.call_request import CallRequest
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.server_calls import (
    Connection,
    first_error,
    malformed,
    protocol_error,
    result_outcome,
    with_links,
)
from yao_actors.tools.server_handle import unavailable_outcome
from yao_actors.tools.server_status import ServerStatus
from yao_actors.tools.task_flow import cancelled_outcome
from yao_actors.tools.task_start import handshake_state
from yao_actors.tools.task_state import TaskOp, TaskState, poll_interval
from yao_actors.tools.task_wire import CancelTask, DetailedTask, GetTask, TaskIdParams, UpdateTask, UpdateTaskParams

logger = logging.getLogger(__name__)

#: The error of a 2026-07-28 task that failed with a JSON-RPC error.
FAILED: Final = "the task {task!r} of tool {tool!r} failed: {message} (JSON-RPC error {code})"


async def execute_task_op(
    spec: ServerSpec, status: ServerStatus, connection: Connection, request: CallRequest, op: TaskOp
) -> ToolOutcome:
    """Make ``op`` on ``connection``'s client; an outcome, never an exception."""
    client = connection.client
    assert client is not None
    try:
        outcome = await _send(spec, status, client, request, op)
    except MCPError as exc:
        return await protocol_error(spec, connection, request, exc)
    except pydantic.ValidationError as exc:
        connection.answered = True
        reason = first_error(exc)
        logger.warning("server %r: %s %r: %s", spec.id, op.kind, op.task_id, reason, extra={"server": spec.id})
        return malformed(request, reason)
    except Exception as exc:
        logger.warning("server %r: task %s failed", spec.id, op.kind, exc_info=True, extra={"server": spec.id})
        return unavailable_outcome(spec, f"{type(exc).__name__}: {exc}", started=request.started)
    connection.answered = True
    return outcome


async def _send(
    spec: ServerSpec, status: ServerStatus, client: mcp.Client, request: CallRequest, op: TaskOp
) -> ToolOutcome:
    session = client.session
    if op.design is TaskDesign.EXTENSION:
        if op.kind == "get":
            detailed = await session.send_request(GetTask(params=TaskIdParams(task_id=op.task_id)), DetailedTask)
            if detailed.task_id != op.task_id:
                return _other_task(spec, request, op, detailed.task_id)
            return await _detailed_outcome(spec, status, client, request, op, detailed)
        if op.kind == "update":
            params = UpdateTaskParams(task_id=op.task_id, input_responses=dict(op.responses or {}))
            await session.send_request(UpdateTask(params=params), mcp_types.Result)
            return _acknowledged(request, op)
        if op.kind == "cancel":
            await session.send_request(CancelTask(params=TaskIdParams(task_id=op.task_id)), mcp_types.Result)
            return _acknowledged(request, op)
        raise ValueError(f"a 2026-07-28 task has no {op.kind!r} request")
    if op.kind == "get":
        get = mcp_types.GetTaskRequest(params=mcp_types.GetTaskRequestParams(task_id=op.task_id))
        task = await session.send_request(get, mcp_types.GetTaskResult)
        if task.task_id != op.task_id:
            return _other_task(spec, request, op, task.task_id)
        return ToolOutcome(task=handshake_state(task), duration=trio.current_time() - request.started)
    if op.kind == "result":
        params_r = mcp_types.GetTaskPayloadRequestParams(task_id=op.task_id)
        result = await session.send_request(mcp_types.GetTaskPayloadRequest(params=params_r), mcp.types.CallToolResult)
        return await _final(spec, status, client, request, result)
    if op.kind == "cancel":
        params_c = mcp_types.CancelTaskRequestParams(task_id=op.task_id)
        await session.send_request(mcp_types.CancelTaskRequest(params=params_c), mcp_types.Result)
        return _acknowledged(request, op)
    raise ValueError(f"a 2025-11-25 task has no {op.kind!r} request")


def _other_task(spec: ServerSpec, request: CallRequest, op: TaskOp, said: str) -> ToolOutcome:
    """A ``tasks/get`` answered about another task than the one asked: a malformed answer, never taken as this
    task's (its status, let alone its result)."""
    reason = f"tasks/get for task {op.task_id!r} answered about task {said!r:.80}"
    logger.warning("server %r: %s", spec.id, reason, extra={"server": spec.id})
    return malformed(request, reason)


def _acknowledged(request: CallRequest, op: TaskOp) -> ToolOutcome:
    """The outcome of an update or a cancel the server acknowledged: the task goes on (as far as it is known)."""
    state = TaskState(op.task_id, op.design, "working")
    return ToolOutcome(task=state, duration=trio.current_time() - request.started)


async def _detailed_outcome(
    spec: ServerSpec, status: ServerStatus, client: mcp.Client, request: CallRequest, op: TaskOp, task: DetailedTask
) -> ToolOutcome:
    """A 2026-07-28 ``tasks/get`` answer as an outcome: the task's state, or once it ended its result."""
    duration = trio.current_time() - request.started
    if task.status == "completed":
        result = mcp.types.CallToolResult.model_validate(task.result or {}, by_name=False)
        return await _final(spec, status, client, request, result)
    if task.status == "failed":
        error: dict[str, Any] = task.error or {}
        message = error.get("message") if isinstance(error.get("message"), str) else task.status_message
        code = error.get("code") if isinstance(error.get("code"), int) else "unknown"
        text = FAILED.format(task=op.task_id, tool=op.tool, message=message or "no reason given", code=code)
        return ToolOutcome(error=text, kind=ErrorKind.TOOL_ERROR, duration=duration)
    if task.status == "cancelled":
        return cancelled_outcome(op.task_id, op.tool, task.status_message, duration)
    state = TaskState(
        op.task_id,
        TaskDesign.EXTENSION,
        task.status,
        task.status_message,
        poll_interval(task.poll_interval_ms),
        task.input_requests if task.status == "input_required" else None,
    )
    return ToolOutcome(task=state, duration=duration)


async def _final(
    spec: ServerSpec, status: ServerStatus, client: mcp.Client, request: CallRequest, result: mcp.types.CallToolResult
) -> ToolOutcome:
    """The task's result, read as the result of its ``tools/call``."""
    outcome = result_outcome(spec, status, request, result)
    if spec.read_links and outcome.ok and outcome.rich:
        outcome = await with_links(client, request, outcome)
    return outcome
