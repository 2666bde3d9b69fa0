"""Tool calls that become MCP tasks, through a server actor, against real servers in real processes:

- the official ``server-everything`` (2025-11-25 tasks: ``simulate-research-query``, ``taskSupport:
  "required"``) over stdio and over streamable HTTP as its own process;
- the 2026-07-28 tasks-extension test server (``yao_actors.testing.task_servers``) over stdio and streamable HTTP
  (where it refuses a ``tasks/*`` request whose ``Mcp-Name`` is not the task's id);
- a hostile server answering with a task no call asked for.

Each: the handle is stored before the wait, status messages are the call's progress, the result comes once;
failures, ``task_timeout`` and a cancelled run reach the server as ``tasks/cancel``.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from tests.integration.actor_checks import running
from tests.integration.everything_support import everything_stdio, open_everything_http
from yao_actors.cli import main
from yao_actors.errors import ErrorKind
from yao_actors.specs import ServerSpec, StdioTransport
from yao_actors.store.task_handle import TaskDesign, TaskHandle
from yao_actors.testing.processes import TASK_SERVER_COMMAND, open_http_task_server
from yao_actors.testing.task_record import read_task_record
from yao_actors.tools.input_requests import InputAnswer, InputRequest, InputRound, elicit_result
from yao_actors.tools.server_actor import ServerHandle, serve_mcp_server
from yao_actors.tools.task_handle import TaskWatch
from yao_actors.tools.tool_server import CallAnswers, CallOptions

STAGES = ["Gathering sources...", "Analyzing content...", "Synthesizing findings...", "Generating report..."]


@attrs.define
class Watched:
    """A call's TaskWatch, and what it saw: the handles stored, and each progress message after which store."""

    timeout: float = 120.0
    stored: list[TaskHandle] = attrs.field(factory=list)
    seen: list[str] = attrs.field(factory=list)

    def options(self) -> CallOptions:
        async def store(handle: TaskHandle) -> None:
            await trio.lowlevel.checkpoint()
            self.seen.append("stored")
            self.stored.append(handle)

        def progress(_done: float, _total: float | None, message: str | None) -> None:
            self.seen.append(message or "")

        return CallOptions(progress=progress, tasks=TaskWatch("call-1", "run-1", "thread-1", self.timeout, store))


@asynccontextmanager
async def everything_over_http() -> AsyncIterator[ServerSpec]:
    async with open_everything_http() as spec:
        yield spec


@asynccontextmanager
async def everything_over_stdio() -> AsyncIterator[ServerSpec]:
    yield everything_stdio()
    await trio.lowlevel.checkpoint()


EVERYTHING = {"stdio": everything_over_stdio, "http": everything_over_http}


#: server-everything answers each POST with an event stream; the SDK's HTTP client returns from its loop over the
#: stream once it has the answer, leaving the stream's iterators to the garbage collector (mcp 2.3,
#: mcp/client/streamable_http.py): a warning about the SDK, not about the call.
SDK_SSE_LEAK = "ignore:Async generator 'httpx2.:ResourceWarning"


@pytest.mark.filterwarnings(SDK_SSE_LEAK)
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_everything_research_runs_as_a_2025_11_25_task(transport: str) -> None:
    watched = Watched()
    async with EVERYTHING[transport]() as spec, running(spec) as server:
        assert server.statistics().protocol == "2025-11-25"
        assert server.statistics().tasks == "2025-11-25"  # the server offers tasks
        outcome = await server.call_tool("simulate-research-query", {"topic": "tides"}, watched.options())
    assert outcome.ok, outcome.error
    assert outcome.task is None
    assert "# Research Report: tides" in outcome.result
    [handle] = watched.stored
    assert handle.design is TaskDesign.HANDSHAKE_ERA
    assert handle.tool == "simulate-research-query"
    assert handle.poll_interval == 1.0  # the server's pollInterval, 1000 ms
    assert watched.seen[0] == "stored"  # stored before the wait
    messages = watched.seen[1:]
    assert messages[0] == STAGES[0]
    assert messages == sorted(messages, key=STAGES.index)  # the stages, in order, each once


async def test_everything_task_timeout_cancels_the_task_at_the_server() -> None:
    watched = Watched(timeout=1.5)
    async with running(everything_stdio()) as server:
        outcome = await server.call_tool("simulate-research-query", {"topic": "tides"}, watched.options())
        assert outcome.kind is ErrorKind.TIMEOUT
        assert "did not finish within 1.5s (task_timeout)" in (outcome.error or "")
        # The same task polled again: the server says it was cancelled (the tasks/cancel reached it).
        [handle] = watched.stored
        later = attrs.evolve(handle, deadline=handle.deadline + 60)
        again = await server.poll_task(later)
    assert again.kind is ErrorKind.TOOL_ERROR
    assert again.error is not None
    assert "was cancelled by the server" in again.error


def task_server_stdio(record: Path, **spec: object) -> ServerSpec:
    command = (*TASK_SERVER_COMMAND[1:], "--record", str(record))
    return ServerSpec("tasks", StdioTransport(TASK_SERVER_COMMAND[0], command), **spec)  # type: ignore[arg-type]


@asynccontextmanager
async def task_server_http(record: Path, **spec: object) -> AsyncIterator[ServerSpec]:
    from yao_actors.specs import HttpTransport

    async with open_http_task_server(record) as process:
        yield ServerSpec("tasks", HttpTransport(await process.url()), **spec)  # type: ignore[arg-type]


@asynccontextmanager
async def task_server_over_stdio(record: Path, **spec: object) -> AsyncIterator[ServerSpec]:
    yield task_server_stdio(record, **spec)
    await trio.lowlevel.checkpoint()


TASK_SERVERS: dict[str, Callable[..., AbstractAsyncContextManager[ServerSpec]]] = {
    "stdio": task_server_over_stdio,
    "http": task_server_http,
}


def later(watched: Watched) -> TaskHandle:
    """The call's stored handle, with a minute more to wait."""
    [handle] = watched.stored
    return attrs.evolve(handle, deadline=handle.deadline + 60)


def events(record: Path, task_id: str) -> list[str]:
    return [line["event"] for line in read_task_record(record) if line["task"] == task_id]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_extension_task_finishes_with_its_result_and_status_messages(transport: str, tmp_path: Path) -> None:
    record, watched = tmp_path / "record.jsonl", Watched()
    async with TASK_SERVERS[transport](record) as spec, running(spec) as server:
        assert server.statistics().protocol == "2026-07-28"
        assert server.statistics().tasks == "2026-07-28"  # the server declares the extension
        outcome = await server.call_tool("slow_echo", {"text": "hello"}, watched.options())
    assert outcome.ok
    assert outcome.result == "hello"
    [handle] = watched.stored
    assert handle.design is TaskDesign.EXTENSION
    assert handle.poll_interval == 0.05
    # Stored first; then at most one status message a second, the latest kept: the first and the last, in order.
    steps = ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    assert watched.seen[0] == "stored"
    assert watched.seen[1] == steps[0]
    assert watched.seen[-1] == steps[-1]
    assert watched.seen[1:] == sorted(set(watched.seen[1:]), key=steps.index)
    assert events(record, handle.task_id) == ["ran", "completed"]  # ran once


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_extension_task_that_fails_is_a_tool_error_with_its_json_rpc_error(
    transport: str, tmp_path: Path
) -> None:
    record, watched = tmp_path / "record.jsonl", Watched()
    async with TASK_SERVERS[transport](record) as spec, running(spec) as server:
        outcome = await server.call_tool("task_fail", {"message": "the build broke"}, watched.options())
    [handle] = watched.stored
    assert outcome.kind is ErrorKind.TOOL_ERROR
    assert outcome.error == (
        f"the task {handle.task_id!r} of tool 'task_fail' failed: the build broke (JSON-RPC error -32603)"
    )


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_task_timeout_and_a_cancelled_run_reach_the_server_as_tasks_cancel(
    transport: str, tmp_path: Path
) -> None:
    record = tmp_path / "record.jsonl"
    timed, abandoned = Watched(timeout=1.0), Watched()
    async with TASK_SERVERS[transport](record) as spec, running(spec) as server:
        outcome = await server.call_tool("forever", {}, timed.options())
        with trio.CancelScope() as run:  # the run is cancelled once the task is stored and reported
            options = abandoned.options()

            def cancel_on_progress(_done: float, _total: float | None, message: str | None) -> None:
                abandoned.seen.append(message or "")
                run.cancel()

            await server.call_tool("forever", {}, attrs.evolve(options, progress=cancel_on_progress))
        assert run.cancelled_caught
        # Polled again, each task says the server cancelled it at the client's request.
        again = [await server.poll_task(later(watched)) for watched in (timed, abandoned)]
    assert outcome.kind is ErrorKind.TIMEOUT
    for watched, outcome_again in zip((timed, abandoned), again, strict=True):
        [handle] = watched.stored
        assert outcome_again.error == (
            f"the task {handle.task_id!r} of tool 'forever' was cancelled by the server: "
            "cancelled at the client's request"
        )
        assert events(record, handle.task_id) == ["ran", "cancelled"]


async def test_with_tasks_never_no_task_is_asked_for(tmp_path: Path) -> None:
    record, watched = tmp_path / "record.jsonl", Watched()
    async with running(task_server_stdio(record, tasks="never")) as server:
        assert server.statistics().tasks == "2026-07-28"  # offered, and not asked for
        outcome = await server.call_tool("slow_echo", {"text": "inline"}, watched.options())
        required = await server.call_tool("forever", {}, watched.options())
    assert outcome.ok
    assert outcome.result == "inline"
    assert watched.stored == []
    assert required.kind is ErrorKind.TOOL_ERROR
    assert "(JSON-RPC error -32021)" in (required.error or "")


async def test_a_2025_11_25_task_nobody_asked_for_is_a_clear_tool_error() -> None:
    hostile = ServerSpec("hostile", StdioTransport(sys.executable, ("-m", "tests.integration.malformed_server")))
    async with running(hostile) as server:
        outcome = await server.call_tool("unasked_task", {"text": "x"}, Watched().options())
        fine = await server.call_tool("echo", {"text": "still here"})
    assert outcome.kind is ErrorKind.TOOL_ERROR
    assert outcome.error is not None
    assert outcome.error.startswith(
        "server 'hostile' answered tool 'unasked_task' with a task, which this call did not ask for"
    )
    assert fine.ok
    assert fine.result == {"said": "still here"}


def cli_config(tmp_path: Path) -> str:
    from tests.integration.everything_support import ENTRY

    servers = {
        "everything": {"command": "node", "args": [ENTRY, "stdio"]},
        "tasks": {"command": TASK_SERVER_COMMAND[0], "args": list(TASK_SERVER_COMMAND[1:])},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)


def test_cli_tools_marks_tools_that_run_as_tasks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = cli_config(tmp_path)
    assert main(["tools", "--config", path, "--server", "everything", "--json"]) == 0
    listed = {tool["tool"]: tool["taskSupport"] for tool in json.loads(capsys.readouterr().out)["tools"]}
    assert listed["simulate-research-query"] == "required"
    assert listed["echo"] == "forbidden"
    assert main(["tools", "--config", path, "--server", "everything"]) == 0
    text = capsys.readouterr().out
    [research] = [block for block in text.split("\n\n") if block.startswith("everything.simulate-research-query")]
    assert "\n  runs as an MCP task: required" in research
    [echo] = [block for block in text.split("\n\n") if block.startswith("everything.echo")]
    assert "MCP task" not in echo


@pytest.mark.parametrize(
    ("server", "tool", "arguments", "said", "printed"),
    [
        ("tasks", "slow_echo", '{"text": "hi"}', ["step 1 of 3"], '"hi"'),  # the others paced: one a second
        ("everything", "simulate-research-query", '{"topic": "tides"}', STAGES[:1], "# Research Report: tides"),
    ],
)
def test_cli_call_shows_the_tasks_status_lines_and_waits_for_its_result(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    server: str,
    tool: str,
    arguments: str,
    said: list[str],
    printed: str,
) -> None:
    assert main(["call", "--config", cli_config(tmp_path), server, tool, arguments]) == 0
    captured = capsys.readouterr()
    lines = [line.removeprefix(f"yao-actors: {tool}: ") for line in captured.err.splitlines() if tool in line]
    assert lines[: len(said)] == said
    assert printed in captured.out


@pytest.mark.filterwarnings(SDK_SSE_LEAK)
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_everything_asks_during_its_task_and_the_answer_reaches_it(transport: str) -> None:
    watched = Watched()
    async with EVERYTHING[transport]() as spec, running(spec) as server:
        asked = await server.call_tool(
            "simulate-research-query", {"topic": "python", "ambiguous": True}, watched.options()
        )
        assert asked.kind is ErrorKind.INPUT_REQUIRED
        round_ = asked.result
        assert isinstance(round_, InputRound)
        assert round_.ticket is not None  # tasks/result is held open for the answer
        [(_key, question)] = round_.questions
        assert "could have multiple interpretations" in question.message
        answer = InputAnswer("accept", {"interpretation": "snake"})
        answers = CallAnswers(round_.arguments, ticket=round_.ticket, answer=answer)
        done = await server.call_tool("simulate-research-query", dict(round_.arguments), CallOptions(answers=answers))
    assert done.ok, done.error
    assert "# Research Report: python (snake)" in done.result


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_extension_task_asks_and_tasks_update_answers_it(transport: str, tmp_path: Path) -> None:
    record, watched = tmp_path / "record.jsonl", Watched()
    async with TASK_SERVERS[transport](record) as spec, running(spec) as server:
        asked = await server.call_tool("ask", {"question": "Which branch?"}, watched.options())
        assert asked.kind is ErrorKind.INPUT_REQUIRED
        round_ = asked.result
        assert isinstance(round_, InputRound)
        [(key, question)] = round_.questions
        assert (key, question.message) == ("answer", "Which branch?")
        responses = {key: elicit_result(InputAnswer("accept", {"answer": "main"}), question.schema)}
        answers = CallAnswers(round_.arguments, responses, round_.request_state)
        again = Watched()
        done = await server.call_tool("ask", dict(round_.arguments), attrs.evolve(again.options(), answers=answers))
    assert done.ok, done.error
    assert done.result == "you said: main"
    [handle] = watched.stored
    [resumed] = again.stored  # the same task, stored again for the run that answered it
    assert resumed.task_id == handle.task_id
    assert events(record, handle.task_id) == ["ran", "completed"]  # not cancelled while it waited, ran once


async def test_an_input_handler_answers_a_tasks_questions_in_process(tmp_path: Path) -> None:
    record, asked = tmp_path / "record.jsonl", []

    async def handler(question: InputRequest) -> InputAnswer:
        await trio.lowlevel.checkpoint()
        asked.append(question.message)
        return InputAnswer("accept", {"answer": "dev"})

    spec = task_server_stdio(record)
    async with trio.open_nursery() as nursery:
        start = functools.partial(serve_mcp_server, spec, input_handler=handler)
        server: ServerHandle = await nursery.start(start)
        watched = Watched()
        done = await server.call_tool("ask", {"question": "Which branch?"}, watched.options())
        nursery.cancel_scope.cancel()
    assert done.ok, done.error
    assert done.result == "you said: dev"
    assert asked == ["Which branch?"]
    [handle] = watched.stored[:1]
    assert events(record, handle.task_id) == ["ran", "completed"]
