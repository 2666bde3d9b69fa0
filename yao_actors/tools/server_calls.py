"""One tool call on a server actor's connection, and what its answer becomes.

A worker of the actor (:mod:`~yao_actors.tools.server_actor`) hands each request to :func:`execute_call`, which
always returns a :class:`~yao_actors.tools.results.ToolOutcome`: a JSON-RPC error the server answers is the
tool's failure (``tool_error``: the server is up and keeps its state); a lost connection or a request the network
failed is ``server_unavailable``; an answer that cannot be read is :data:`~yao_actors.transports.malformed.MALFORMED`.
"""

from __future__ import annotations

import logging

import attrs
import mcp
import mcp.types
import mcp_types
import pydantic
import trio
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from yao_actors.errors import ErrorKind
from yao_actors.specs import ServerSpec
from yao_actors.tools.apps import mcp_result
from yao_actors.tools.askers import Askers
from yao_actors.tools.call_request import CallRequest, ProgressItem
from yao_actors.tools.links import read_links
from yao_actors.tools.results import ToolOutcome, call_outcome
from yao_actors.tools.server_handle import unavailable_outcome
from yao_actors.tools.server_questions import input_required_outcome
from yao_actors.tools.server_status import ServerStatus
from yao_actors.tools.task_start import (
    UNASKED_TASK,
    call_for_task,
    extension_state,
    handshake_state,
    task_created,
)
from yao_actors.tools.task_wire import MAX_TASK_ID, ExtensionTask, TaskAnswered, is_task_answer
from yao_actors.transports import TRANSPORT_FAILURE, Link, is_modern
from yao_actors.transports.malformed import MALFORMED

logger = logging.getLogger(__name__)

#: How long a call that saw its connection close waits for the reason (exit code, stderr).
LOSS_REPORT_WAIT = 1.0
#: Seconds (at most a tenth of what is left) before a call's deadline at which reading its links stops.
LINK_READ_MARGIN = 0.5


@attrs.define(eq=False)
class Connection:
    """One connection of the actor: its client once connected, its health report, what it left unanswered.

    The supervisor makes it before connecting, so that whatever way the
    connection ends — refused, timed out, lost while serving — it can still
    answer the requests the connection took and never finished.
    """

    link: Link = attrs.field(factory=Link)
    client: mcp.Client | None = None
    catalog_changed: trio.Event = attrs.field(factory=trio.Event)
    answered: bool = False
    unanswered: list[CallRequest] = attrs.field(factory=list)
    askers: Askers = attrs.field(factory=Askers)
    """Its calls in flight, and which of them can have asked a question (:mod:`~yao_actors.tools.askers`)."""


async def execute_call(
    spec: ServerSpec, status: ServerStatus, connection: Connection, request: CallRequest, *, keep_rounds: bool
) -> ToolOutcome:
    """Make ``request`` on ``connection``'s client; the outcome, never an exception, for whatever went wrong.

    ``keep_rounds``: a 2026-07-28 call that asks the user ends ``input_required`` with its round (no input handler
    answers in process), instead of the SDK answering the round.
    """
    client = connection.client
    assert client is not None
    if request.method != "tools/call":
        return await app_request(spec, connection, request)
    progress = progress_forwarder(request) if request.wants_progress else None
    try:
        if keep_rounds and is_modern(client.protocol_version):
            # Input rounds are ours to keep (as interrupts), not the SDK's to answer in process.
            answer = await client.session.call_tool(
                request.name,
                request.arguments,
                progress_callback=progress,
                input_responses=request.input_responses,  # type: ignore[arg-type]
                request_state=request.request_state,
                allow_input_required=True,
                allow_claimed=True,
            )
            if isinstance(answer, mcp.types.InputRequiredResult):
                connection.answered = True
                return input_required_outcome(spec.id, request, answer)
            if isinstance(answer, ExtensionTask):
                raise TaskAnswered(answer)
            result = answer
        elif request.name in status.task_tools:
            result = await call_for_task(client, request)
        else:
            result = await client.call_tool(
                request.name,
                request.arguments,
                progress_callback=progress,
                input_responses=request.input_responses,  # type: ignore[arg-type]
                request_state=request.request_state,
            )
    except TaskAnswered as answered:
        connection.answered = True
        return task_created(extension_state(answered.task), request)
    except MCPError as exc:
        return await protocol_error(spec, connection, request, exc)
    except pydantic.ValidationError as exc:  # JSON-RPC, but not the result the SDK expects
        return unreadable(spec, connection, request, exc)
    except Exception as exc:
        logger.warning(
            "server %r: tools/call %r failed", spec.id, request.name, exc_info=True, extra={"server": spec.id}
        )
        return unavailable_outcome(spec, f"{type(exc).__name__}: {exc}", started=request.started)
    connection.answered = True
    outcome = result_outcome(spec, status, request, result)
    if spec.read_links and outcome.ok and outcome.rich:
        outcome = await with_links(client, request, outcome)
    return outcome


def result_outcome(
    spec: ServerSpec, status: ServerStatus, request: CallRequest, result: mcp.types.Result
) -> ToolOutcome:
    """The outcome of ``request`` the server answered with ``result``: a task to follow, or the tool's result
    (read against its ``outputSchema``, and kept as sent for an app)."""
    if isinstance(result, mcp_types.CreateTaskResult):
        size = len(result.task.task_id)
        if not 1 <= size <= MAX_TASK_ID:  # as the 2026-07-28 answer's own check: the id is named on every poll
            return malformed(request, f"task.taskId: a task's id is 1 to {MAX_TASK_ID} characters, not {size}")
        return task_created(handshake_state(result.task), request)
    assert isinstance(result, mcp.types.CallToolResult)
    outcome = call_outcome(result, status.output_schemas.get(request.name), trio.current_time() - request.started)
    if spec.apps and (request.keep_result or request.name in status.app_tools):
        outcome = attrs.evolve(outcome, app_result=mcp_result(result))
    return outcome


async def with_links(client: mcp.Client, request: CallRequest, outcome: ToolOutcome) -> ToolOutcome:
    """``outcome`` with the text of the resources its result links to, read within ``request``'s deadline."""
    # The reads end a little before the call's deadline, so the call still answers with what it has.
    margin = min(LINK_READ_MARGIN, (request.scope.deadline - trio.current_time()) / 10)
    linked = await read_links(client, outcome.result, request.scope.deadline - margin)
    return attrs.evolve(outcome, result=linked, duration=trio.current_time() - request.started)


async def protocol_error(spec: ServerSpec, connection: Connection, request: CallRequest, exc: MCPError) -> ToolOutcome:
    """Classify a JSON-RPC error: the connection closed, the network failed the request, or the server answered.

    An error the server answered (whatever its code) is the tool's failure, not the server's: the server
    is up and serving, so its state stays as it is.
    """
    if exc.code == mcp.types.CONNECTION_CLOSED:
        # The connection ended under the call: wait for the transport's report of why.
        with trio.move_on_after(LOSS_REPORT_WAIT):
            await connection.link.lost.wait()
        connection.link.mark_lost("the connection to the server closed")
        await trio.sleep_forever()  # the connection is being cancelled; _run_call reports the loss
    if exc.code == TRANSPORT_FAILURE:
        reason = f"the request failed: {exc.error.message}"
        return unavailable_outcome(spec, reason, started=request.started, lost=True)
    connection.answered = True
    if exc.code == mcp.types.PARSE_ERROR:
        # The answer could not be read (the transport said so, and said why in its log line); or the server
        # says it could not read the request: either way nothing of the call came back.
        return malformed(request, exc.error.data if isinstance(exc.error.data, str) else None)
    return ToolOutcome(
        error=f"{exc.error.message} (JSON-RPC error {exc.code})",
        kind=ErrorKind.TOOL_ERROR,
        duration=trio.current_time() - request.started,
    )


def unreadable(
    spec: ServerSpec, connection: Connection, request: CallRequest, exc: pydantic.ValidationError
) -> ToolOutcome:
    """The outcome of an answer that is not the result asked for: a task nobody asked for, or a malformed one."""
    connection.answered = True
    if any(is_task_answer(error.get("input")) for error in exc.errors(include_url=False)):
        return ToolOutcome(
            error=UNASKED_TASK.format(server=spec.id, tool=request.name),
            kind=ErrorKind.TOOL_ERROR,
            duration=trio.current_time() - request.started,
        )
    reason = first_error(exc)
    logger.warning(
        "server %r: tools/call %r: %s: %s", spec.id, request.name, MALFORMED, reason, extra={"server": spec.id}
    )
    return malformed(request, reason)


def malformed(request: CallRequest, reason: str | None) -> ToolOutcome:
    """The outcome of a call whose answer could not be read (``reason``: what was wrong, when known)."""
    error = MALFORMED if reason is None else f"{MALFORMED}: {reason}"
    return ToolOutcome(error=error, kind=ErrorKind.TOOL_ERROR, duration=trio.current_time() - request.started)


def first_error(exc: pydantic.ValidationError) -> str:
    """The first thing pydantic found wrong, in one line: where, and what."""
    first = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])


def progress_forwarder(request: CallRequest) -> ProgressFnT:
    """A progress callback that never blocks the session: it drops items a slow caller has no room for."""

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        request.report(ProgressItem(progress, total, message))

    return forward


async def app_request(spec: ServerSpec, connection: Connection, request: CallRequest) -> ToolOutcome:
    """An app's ``resources/read`` (of the URI ``request.name``) or ``ping`` on the connection: the MCP result as
    the server sent it, in ``app_result`` (and ``result``); a failure is an outcome, as a call's is. A stateless
    (2026-07-28) connection has no ``ping``: a live connection answers it with an empty result."""
    client = connection.client
    assert client is not None
    try:
        if request.method == "resources/read":
            result: mcp.types.Result = await client.read_resource(request.name)
        elif request.method == "ping" and is_modern(client.protocol_version):
            result = mcp.types.EmptyResult()  # 2026-07-28 has no ping: the connection serving is the answer
        elif request.method == "ping":
            result = await client.send_ping()
        else:
            error = f"{request.method} is not a request this runtime makes for an app"
            return ToolOutcome(error=error, kind=ErrorKind.INVALID_ARGUMENTS)
    except MCPError as exc:
        return await protocol_error(spec, connection, request, exc)
    except pydantic.ValidationError as exc:
        return malformed(request, first_error(exc))
    except Exception as exc:
        logger.warning("server %r: %s failed", spec.id, request.method, exc_info=True, extra={"server": spec.id})
        return unavailable_outcome(spec, f"{type(exc).__name__}: {exc}", started=request.started)
    connection.answered = True
    kept = mcp_result(result)
    return ToolOutcome(result=kept, app_result=kept, duration=trio.current_time() - request.started)
