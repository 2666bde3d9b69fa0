"""The tasks wire in the server actor, against in-process servers: a task nobody asked for is a clear
``tool_error``; the 2026-07-28 extension is declared only with ``tasks: "auto"``; a call that is not a task
goes the way it always went."""

from __future__ import annotations

from typing import Any

import attrs
import mcp.types
import pytest
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolRequestParams

from tests.integration.actor_checks import running
from yao_actors.errors import ErrorKind
from yao_actors.specs import InMemoryTransport, ServerSpec
from yao_actors.store.task_handle import TaskDesign, TaskHandle
from yao_actors.tools.input_requests import InputRound
from yao_actors.tools.server_status import ServerStatus
from yao_actors.tools.task_input import ROUND_PREFIX, input_outcome, round_state, task_of_round
from yao_actors.tools.task_state import TaskState
from yao_actors.tools.task_wire import TASKS_EXTENSION, is_task_answer, task_support
from yao_actors.tools.tool_server import CallOptions

NOW = "2026-12-06T12:00:00Z"


class Pushy(Extension):
    """Answers every call of ``research`` with a task, whether or not the client asked for one."""

    identifier = "com.example/pushy"

    def __init__(self) -> None:
        self.declared: list[bool] = []

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        meta = params.meta or {}
        capabilities = meta.get("io.modelcontextprotocol/clientCapabilities") or {}
        self.declared.append(TASKS_EXTENSION in (capabilities.get("extensions") or {}))
        if params.name != "research":
            return await call_next(ctx)
        return {"resultType": "task", "taskId": "t-1", "status": "working", "createdAt": NOW, "lastUpdatedAt": NOW}


def pushy_server() -> tuple[MCPServer, Pushy]:
    extension = Pushy()
    server = MCPServer("pushy", extensions=[extension])

    @server.tool()
    async def research(topic: str) -> str:
        return f"inline {topic}"

    @server.tool()
    async def echo(text: str) -> str:
        return text

    return server, extension


async def test_a_task_the_call_did_not_ask_for_is_a_clear_tool_error() -> None:
    """2026-07-28 with ``tasks: "never"`` (the 2025-11-25 case: tests/integration/test_tasks_wire.py)."""
    server, _extension = pushy_server()
    spec = ServerSpec("pushy", InMemoryTransport(server), protocol="2026-07-28", tasks="never")
    async with running(spec) as handle:
        outcome = await handle.call_tool("research", {"topic": "x"}, CallOptions())
        other = await handle.call_tool("echo", {"text": "still fine"})
    assert outcome.kind is ErrorKind.TOOL_ERROR
    assert outcome.error == (
        "server 'pushy' answered tool 'research' with a task, which this call did not ask for "
        "(the server's tasks setting, or the tool's execution.taskSupport, rules one out)"
    )
    assert other.ok
    assert other.result == "still fine"


@pytest.mark.parametrize(("tasks", "declared"), [("auto", True), ("never", False)])
async def test_the_extension_is_declared_on_each_request_only_with_tasks_auto(tasks: str, declared: bool) -> None:
    server, extension = pushy_server()
    spec = ServerSpec("pushy", InMemoryTransport(server), protocol="2026-07-28", tasks=tasks)  # type: ignore[arg-type]
    async with running(spec) as handle:
        outcome = await handle.call_tool("echo", {"text": "plain"})
    assert outcome.ok
    assert outcome.result == "plain"
    assert outcome.task is None
    assert extension.declared == [declared]


def test_task_support_reads_a_tools_execution_and_defaults_to_forbidden() -> None:
    class Execution:
        def __init__(self, support: Any) -> None:
            self.task_support = support

    class Tool:
        def __init__(self, execution: Any) -> None:
            self.execution = execution

    assert task_support(Tool(Execution("required"))) == "required"
    assert task_support(Tool(Execution("optional"))) == "optional"
    assert task_support(Tool(Execution("sometimes"))) == "forbidden"
    assert task_support(Tool(None)) == "forbidden"


def test_a_task_answer_is_recognised_in_either_design() -> None:
    assert is_task_answer({"resultType": "task", "taskId": "a"})
    assert is_task_answer({"task": {"taskId": "a", "status": "working"}})
    assert not is_task_answer({"content": []})
    assert not is_task_answer({"task": "not a task"})
    assert not is_task_answer("text")


def a_handle(**changes: Any) -> TaskHandle:
    handle = TaskHandle(
        server="srv", task_id="t-9", design=TaskDesign.EXTENSION, call_id="c", tool="ask", arguments={"q": 1},
        run_id="r", thread_id="th", created_at=0.0, deadline=60.0, poll_interval=0.25,
    )  # fmt: skip
    return attrs.evolve(handle, **changes)


def test_a_task_input_rounds_state_names_the_task_and_nothing_else_does() -> None:
    named = task_of_round(round_state(a_handle()))
    assert named == TaskState("t-9", TaskDesign.EXTENSION, "working", poll_interval=0.25)
    for state in (
        None,
        "a server's own state",
        ROUND_PREFIX + "not json",
        ROUND_PREFIX + '["t-9"]',
        ROUND_PREFIX + '{"task": "", "design": "2026-07-28"}',
        ROUND_PREFIX + '{"task": "t-9", "design": "2025-11-25"}',  # that design's questions come another way
    ):
        assert task_of_round(state) is None, state
    odd_poll = task_of_round(ROUND_PREFIX + '{"task": "t-9", "design": "2026-07-28", "poll": true}')
    assert odd_poll is not None
    assert odd_poll.poll_interval is None


def test_a_tasks_questions_become_an_input_round_or_a_clear_error() -> None:
    form = {"type": "object", "properties": {"answer": {"type": "string"}}}
    ask = {"answer": {"method": "elicitation/create", "params": {"message": "Which?", "requestedSchema": form}}}
    state = TaskState("t-9", TaskDesign.EXTENSION, "input_required", input_requests=ask)
    outcome = input_outcome(a_handle(), state)
    assert outcome.kind is ErrorKind.INPUT_REQUIRED
    assert isinstance(outcome.result, InputRound)
    assert outcome.result.request_state == round_state(a_handle())
    assert [(key, q.message, q.tool) for key, q in outcome.result.questions] == [("answer", "Which?", "ask")]
    nested = {"type": "object", "properties": {"where": {"type": "object", "properties": {}}}}
    deep = {"x": {"method": "elicitation/create", "params": {"message": "Where?", "requestedSchema": nested}}}
    refused = input_outcome(a_handle(), attrs.evolve(state, input_requests=deep))
    assert refused.kind is ErrorKind.TOOL_ERROR
    sampling = {"s": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}}
    other = input_outcome(a_handle(), attrs.evolve(state, input_requests=sampling))
    assert other.kind is ErrorKind.TOOL_ERROR
    garbage = input_outcome(a_handle(), attrs.evolve(state, input_requests={"x": 5}))
    assert garbage.kind is ErrorKind.TOOL_ERROR
    assert garbage.error is not None
    assert "asks for input that cannot be read" in garbage.error


def test_which_2025_11_25_tools_ask_for_a_task() -> None:
    def tool(name: str, support: str | None) -> mcp.types.Tool:
        execution = None if support is None else {"taskSupport": support}
        return mcp.types.Tool.model_validate({"name": name, "inputSchema": {"type": "object"}, "execution": execution})

    catalog = (tool("must", "required"), tool("may", "optional"), tool("never", "forbidden"), tool("plain", None))
    auto, never = ServerStatus(), ServerStatus(ask_optional=False)
    for status in (auto, never):
        status.offer_tasks(TaskDesign.HANDSHAKE_ERA)
        status.set_catalog(catalog)
    assert auto.task_tools == {"must", "may"}
    assert never.task_tools == {"must"}  # a tool that requires a task always gets one
    auto.offer_tasks(None)  # the next connection's server offers none
    assert auto.task_tools == frozenset()
    auto.offer_tasks(TaskDesign.EXTENSION)  # 2026-07-28: the server decides per call
    assert auto.task_tools == frozenset()
