"""``yao_actors.aio`` from plain ``asyncio.run`` programs: the real stdio servers in a Trio guest run.

Each test is a synchronous test running its own asyncio loop, as an asyncio program would; every one checks that
no child process of this one is left once the block is over.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from tests.integration.processes import REPO, descendants, running
from tests.integration.test_service_readme_example import page_examples, run_example
from yao_actors.aio import AioServerHandle, Runtime, open_runtime
from yao_actors.aio.guest import GUEST_SWITCH_INTERVAL
from yao_actors.config import AssistantSpec, Config, ServerRef, default_config
from yao_actors.errors import ConfigError, RunError, RunErrorCode
from yao_actors.models.base import Completion, ToolCall
from yao_actors.testing import FunctionModel, stdio_test_server
from yao_actors.tools.forwarding import ForwardingServer
from yao_actors.tools.tool_server import ServerState, ToolServer, ToolSource

SEED_QUESTION = "北京今天适合穿什么?"


def run_program(main: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run ``main`` with ``asyncio.run`` (under a minute); afterwards no child process of this one may run."""

    async def bounded() -> Any:
        async with asyncio.timeout(60):
            return await main()

    result = asyncio.run(bounded())
    left = [pid for pid in descendants(os.getpid()) if running(pid)]
    assert left == [], f"child processes left after the runtime's block: {left}"
    return result


def _slow_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] == "user":
        return Completion(tool_calls=(ToolCall("slow", "s1__sleep", '{"seconds": 30}'),))
    return "done"


def slow_config() -> Config:
    """An assistant whose model calls a 30-second tool of the stdio test server."""
    return Config(
        servers={"s1": stdio_test_server("s1")},
        assistants={"default": AssistantSpec(id="default", model="m", servers=(ServerRef("s1"),))},
    )


async def stats(runtime: Runtime) -> dict[str, Any]:
    outcome = await runtime.servers["s1"].call_tool("stats", {})
    assert isinstance(outcome.result, dict), outcome
    return outcome.result


def test_an_asyncio_program_gets_the_seeds_answer_from_the_demo_stdio_servers() -> None:
    async def main() -> Any:
        async with open_runtime(default_config(environ={}), ready_timeout=30) as runtime:
            pids = {pid for pid in descendants(os.getpid()) if running(pid)}
            assert len(pids) >= 2  # the weather and clothing servers, as real child processes
            weather = await runtime.servers["weather"].call_tool("get", {"city": "北京"})
            result = await runtime.run("default", SEED_QUESTION, thread_id="seed")
            history = await runtime.history("seed")
            threads = await runtime.threads()
            return weather, result, history, threads

    weather, result, history, threads = run_program(main)
    assert weather.ok, weather
    assert result.ok, result
    assert "北京" in result.text
    assert str(weather.result["temp"]) in result.text
    assert "羽绒服" in result.text
    assert [r.name for r in result.tool_results] == ["weather__get", "clothing__advise"]
    assert history.to_wire()["messages"][0]["role"] == "user"
    assert [t.thread_id for t in threads] == ["seed"]


def test_every_member_of_the_tool_server_protocol_is_forwarded_not_inherited_from_it() -> None:
    members = [name for protocol in (ToolSource, ToolServer) for name in vars(protocol) if not name.startswith("_")]
    assert {"call_tool", "wait_state_change", "reaches_parked"} <= set(members)
    for wrapper in (AioServerHandle, ForwardingServer):
        # Where each member is defined: never the protocol's own stub.
        owners = {name: next(c for c in wrapper.__mro__ if name in vars(c)) for name in members}
        assert [name for name, owner in owners.items() if owner in (ToolSource, ToolServer)] == [], wrapper


def test_an_asyncio_program_uses_a_server_through_the_whole_tool_server_protocol() -> None:
    async def main() -> Any:
        async with open_runtime(slow_config(), models={"m": FunctionModel(_slow_model)}, ready_timeout=30) as runtime:
            server = runtime.servers["s1"]
            read = (server.id, server.spec.id, server.state, server.statistics().state, server.tools_version)
            tools = [tool.name for tool in await server.list_tools()]
            ready = await server.wait_for_state(ServerState.READY, ServerState.DOWN)
            parked = await server.reaches_parked("no-such-ticket")
            change = asyncio.create_task(server.wait_state_change())
            await asyncio.sleep(0)
            change.cancel()  # no change comes: cancelling the awaiting task cancels the wait in Trio
            with pytest.raises(asyncio.CancelledError):
                await change
            return read, tools, ready, parked

    read, tools, ready, parked = run_program(main)
    assert read[:4] == ("s1", "s1", ServerState.READY, ServerState.READY)
    assert read[4] >= 1
    assert {"sleep", "stats"} <= set(tools)
    assert ready is ServerState.READY
    assert parked is False


def test_open_run_streams_the_runs_events_and_forget_deletes_the_thread() -> None:
    async def main() -> Any:
        async with open_runtime(default_config(environ={}), ready_timeout=30) as runtime:
            async with runtime.open_run("default", SEED_QUESTION, thread_id="t", run_id="r") as events:
                seen = [event async for event in events]
                result = events.result
            async with runtime.open_resume("r", after_seq=3) as resumed:
                replayed = [event async for event in resumed]
            forgotten = await runtime.forget("t")
            return seen, result, replayed, forgotten, await runtime.threads()

    seen, result, replayed, forgotten, threads = run_program(main)
    assert replayed == seen[3:]  # the stored events after seq 3, up to the terminal one
    assert seen[0]["type"] == "RUN_STARTED"
    assert seen[-1]["type"] == "RUN_FINISHED"
    assert [e["seq"] for e in seen] == list(range(1, len(seen) + 1))
    assert result is not None
    assert result.ok
    assert forgotten is True
    assert threads == []


def test_two_concurrent_runs_from_two_asyncio_tasks() -> None:
    async def main() -> Any:
        async with open_runtime(default_config(environ={}), ready_timeout=30) as runtime:
            async with asyncio.TaskGroup() as group:
                beijing = group.create_task(runtime.run("default", SEED_QUESTION, thread_id="bj"))
                shanghai = group.create_task(runtime.run("default", "上海今天适合穿什么?", thread_id="sh"))
            return beijing.result(), shanghai.result()

    beijing, shanghai = run_program(main)
    assert beijing.ok
    assert shanghai.ok
    assert "北京" in beijing.text
    assert "上海" in shanghai.text


def test_cancelling_the_task_awaiting_a_run_cancels_the_tool_call_at_the_server() -> None:
    async def main() -> Any:
        async with open_runtime(slow_config(), models={"m": FunctionModel(_slow_model)}, ready_timeout=30) as runtime:
            task = asyncio.create_task(runtime.run("default", "go", thread_id="slow"))
            while (await stats(runtime))["calls"] != {"sleep": 1}:  # noqa: ASYNC110 - the server runs the 30-second tool
                await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            while (await stats(runtime))["cancelled"] != 1:  # noqa: ASYNC110 - the server saw notifications/cancelled
                await asyncio.sleep(0.05)
            return await runtime.history("slow")

    history = run_program(main)
    wire = history.to_wire()["messages"]
    tool_messages = [m for m in wire if m["role"] == "tool"]
    assert len(tool_messages) == 1
    assert "cancelled" in tool_messages[0]["content"]
    assert history.runs[-1].outcome == "cancelled"


def test_leaving_the_block_by_an_exception_stops_the_servers_and_the_exception_comes_out() -> None:
    class Boom(Exception):
        pass

    async def main() -> None:
        async with open_runtime(slow_config(), models={"m": FunctionModel(_slow_model)}, ready_timeout=30) as runtime:
            asyncio.create_task(runtime.run("default", "go"))  # noqa: RUF006 - left in flight on purpose
            while (await stats(runtime))["calls"] != {"sleep": 1}:  # noqa: ASYNC110 - counted in the server
                await asyncio.sleep(0.05)
            raise Boom

    with pytest.raises(Boom):
        run_program(main)


def test_the_trio_apis_exceptions_come_out_as_themselves() -> None:
    async def bad_config() -> None:
        config = Config(assistants={"default": AssistantSpec(id="default", model="nowhere")})
        async with open_runtime(config):
            pass

    with pytest.raises(ConfigError, match="nowhere"):
        run_program(bad_config)

    async def unknown_assistant() -> None:
        async with open_runtime(default_config(environ={})) as runtime:
            await runtime.run("nobody", "hi")

    with pytest.raises(RunError) as raised:
        run_program(unknown_assistant)
    assert raised.value.code is RunErrorCode.UNKNOWN_ASSISTANT


def test_the_asyncio_pages_example_runs_as_written(tmp_path: Path) -> None:
    examples = page_examples("asyncio")
    assert len(examples) == 2
    lines = run_example(tmp_path, examples[0])
    assert lines[0].startswith("True {'city': 'Beijing'")
    assert "北京" in lines[1]
    assert "穿" in lines[1]
    assert "上海" in lines[2]
    assert lines[3] == "RUN_STARTED"
    assert lines[-2] == "RUN_FINISHED"
    assert lines[-1] == "6 True"  # bj keeps the question, two tool calls with their results, and the answer


def test_the_asyncio_pages_fastapi_lines_are_those_of_the_example_file() -> None:
    example = (REPO / "examples" / "fastapi_app.py").read_text(encoding="utf-8")
    block = page_examples("asyncio")[1]
    missing = [line for line in block.splitlines() if line.strip() and line not in example.splitlines()]
    assert missing == []


def test_the_switch_interval_is_lowered_while_the_guest_runs_and_put_back() -> None:
    before = sys.getswitchinterval()

    async def lowered() -> float:
        async with open_runtime(Config()):
            return sys.getswitchinterval()

    async def left_alone() -> float:
        async with open_runtime(Config(), switch_interval=None):
            return sys.getswitchinterval()

    assert run_program(lowered) == GUEST_SWITCH_INTERVAL < before
    assert sys.getswitchinterval() == before
    assert run_program(left_alone) == before


def test_an_asyncio_program_follows_a_task_and_polls_a_stored_one_with_asyncio_progress() -> None:
    import attrs

    from yao_actors.specs import ServerSpec, StdioTransport
    from yao_actors.store.task_handle import TaskHandle
    from yao_actors.testing import TASK_SERVER_COMMAND
    from yao_actors.tools.task_handle import TaskWatch
    from yao_actors.tools.tool_server import CallOptions

    tasks = ServerSpec("tasks", StdioTransport(TASK_SERVER_COMMAND[0], TASK_SERVER_COMMAND[1:]))

    async def main() -> Any:
        config = Config(servers={"tasks": tasks}, assistants={})
        said: list[str | None] = []
        stored: list[TaskHandle] = []

        async def progress(_done: float, _total: float | None, message: str | None) -> None:
            await asyncio.sleep(0)  # an asyncio coroutine: run in the host loop
            said.append(message)

        async def store(handle: TaskHandle) -> None:
            stored.append(handle)

        async with open_runtime(config, ready_timeout=30) as runtime:
            server = runtime.servers["tasks"]
            watch = TaskWatch("c", "r", "t", 60.0, store)
            done = await server.call_tool("slow_echo", {"text": "hi"}, CallOptions(progress=progress, tasks=watch))
            again = await server.poll_task(attrs.evolve(stored[0], deadline=stored[0].deadline + 60))
            return done, said, again

    done, said, again = run_program(main)
    assert done.result == "hi"
    # status messages are paced (at most one a second, the latest kept): the first and the last always arrive, in order
    assert said[0] == "step 1 of 3"
    assert said[-1] == "step 3 of 3"
    assert said in (["step 1 of 3", "step 3 of 3"], ["step 1 of 3", "step 2 of 3", "step 3 of 3"])
    assert again.result == "hi"  # the task, polled again from its handle, still answers with its result
