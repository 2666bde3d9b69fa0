"""How a server actor's ``tools/call`` becomes a task: asking for one, and reading the server's answer.

Which calls ask: on a 2026-07-28 connection every call declares the tasks extension when the server's
``tasks`` setting is ``"auto"`` (the server then decides, per call); on a 2025-11-25 connection, a call of a
tool whose ``execution.taskSupport`` is ``"required"``, or ``"optional"`` with ``tasks: "auto"``, on a server
whose capabilities offer tasks for ``tools/call`` (:meth:`~yao_actors.tools.server_status.ServerStatus.offer_tasks`).
A server that answers with a task a call did not ask for gets a clear ``tool_error`` (:data:`UNASKED_TASK`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import mcp
import mcp_types
import trio
from mcp.client.extension import ClientExtension

from yao_actors.specs import ServerSpec
from yao_actors.store.task_handle import TaskDesign
from yao_actors.tools.call_request import CallRequest
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.task_state import TaskState, poll_interval
from yao_actors.tools.task_wire import TASKS_EXTENSION, ExtensionTask, TasksExtension, handshake_call
from yao_actors.transports import is_modern
from yao_actors.transports.session import GatedSession

#: The error of a call a server answered with a task it was not asked for.
UNASKED_TASK: Final = (
    "server {server!r} answered tool {tool!r} with a task, which this call did not ask for "
    "(the server's tasks setting, or the tool's execution.taskSupport, rules one out)"
)
#: How long a 2025-11-25 server is asked to keep a task's result (milliseconds): none, the server's default.
TASK_TTL_MS: Final[int | None] = None


def client_extensions(spec: ServerSpec) -> Sequence[ClientExtension]:
    """The client extensions a connection to ``spec``'s server declares: the tasks extension unless
    ``tasks: "never"``."""
    return (TasksExtension(),) if spec.tasks == "auto" else ()


def offered_design(client: mcp.Client) -> TaskDesign | None:
    """The tasks design the server offers on ``client``'s connection, if any."""
    capabilities = client.session.server_capabilities
    if capabilities is None:
        return None
    if is_modern(client.protocol_version):
        return TaskDesign.EXTENSION if TASKS_EXTENSION in (capabilities.extensions or {}) else None
    tasks = capabilities.tasks
    requests = tasks.requests if tasks is not None else None
    tools = requests.tools if requests is not None else None
    return TaskDesign.HANDSHAKE_ERA if tools is not None and tools.call is not None else None


async def call_for_task(
    client: mcp.Client, request: CallRequest
) -> mcp_types.CreateTaskResult | mcp_types.CallToolResult:
    """Make a 2025-11-25 ``tools/call`` that asks for a task (the server may still answer with the result)."""
    session = client.session
    assert isinstance(session, GatedSession)
    return await session.send_task_call(handshake_call(request.name, request.arguments, TASK_TTL_MS))


def extension_state(task: ExtensionTask) -> TaskState:
    return TaskState(
        task.task_id, TaskDesign.EXTENSION, task.status, task.status_message, poll_interval(task.poll_interval_ms)
    )


def handshake_state(task: mcp_types.Task) -> TaskState:
    interval = poll_interval(float(task.poll_interval)) if task.poll_interval is not None else None
    return TaskState(task.task_id, TaskDesign.HANDSHAKE_ERA, task.status, task.status_message, interval)


def task_created(state: TaskState, request: CallRequest) -> ToolOutcome:
    """The outcome of a call the server answered with task ``state``: the caller follows the task."""
    return ToolOutcome(task=state, duration=trio.current_time() - request.started)
