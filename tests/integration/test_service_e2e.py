"""The websocket service over the real runtime: stdio MCP servers, real loopback websockets, the chat client."""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from tests.service.support import receive, run_frame, running_service, send, until_terminal, wait_until
from tests.support import server_stats
from yao_actors.cli.chat import chat, open_service_connection
from yao_actors.config import AssistantSpec, Config, ServerRef, ServiceSpec, default_config
from yao_actors.events import parse_event
from yao_actors.models.base import Completion, ToolCall
from yao_actors.runtime import Runtime, open_runtime
from yao_actors.service import Service
from yao_actors.testing import FunctionModel, stdio_test_server

SEED_QUESTION = "北京今天适合穿什么?"


@asynccontextmanager
async def demo_service() -> AsyncIterator[Service]:
    """The embedded default (demo servers over stdio, the offline demo model) behind a loopback service."""
    async with open_runtime(default_config(environ={})) as runtime, running_service(runtime) as service:
        yield service


def _slow_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] == "user":
        return Completion(tool_calls=(ToolCall("slow", "s1__sleep", '{"seconds": 30}'),))
    return "done"


@asynccontextmanager
async def slow_tool_service(*, detach_grace: float = 30.0) -> AsyncIterator[tuple[Runtime, Service]]:
    """A service whose default assistant calls a 30-second tool of a stdio test server."""
    config = Config(
        servers={"s1": stdio_test_server("s1")},
        assistants={"default": AssistantSpec(id="default", model="m", servers=(ServerRef("s1"),))},
        service=ServiceSpec(detach_grace=detach_grace),
    )
    async with (
        open_runtime(config, models={"m": FunctionModel(_slow_model)}) as runtime,
        running_service(runtime) as service,
    ):
        yield runtime, service


async def _cancelled_executions(runtime: Runtime) -> Any:
    return (await server_stats(runtime.servers["s1"]))["cancelled"]


async def _wait_for_cancelled_execution(runtime: Runtime) -> None:
    while await _cancelled_executions(runtime) != 1:  # the count lives in the server process  # noqa: ASYNC110
        await trio.sleep(0.05)


async def test_the_seeds_question_end_to_end() -> None:
    with trio.fail_after(60):
        async with demo_service() as service, open_service_connection(service.url) as ws:
            await send(ws, run_frame(SEED_QUESTION, run_id="seed"))
            events = await until_terminal(ws, "seed")
    for event in events:
        parse_event(event)
    assert [e["toolCallName"] for e in events if e["type"] == "TOOL_CALL_START"] == [
        "weather__get",
        "clothing__advise",
    ]
    weather = json.loads(next(e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"))
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert "北京" in text
    assert str(weather["temp"]) in text
    assert events[-1]["type"] == "RUN_FINISHED"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


async def test_two_threads_at_once_over_the_real_runtime() -> None:
    with trio.fail_after(60):
        async with demo_service() as service, open_service_connection(service.url) as ws:
            await send(ws, run_frame(SEED_QUESTION, run_id="zh", thread_id="t-zh"))
            await send(ws, run_frame("What should I wear in Beijing today?", run_id="en", thread_id="t-en"))
            order: list[str] = []
            ended: set[str] = set()
            while ended != {"zh", "en"}:
                frame = await receive(ws)
                order.append(frame["runId"])
                if frame["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                    assert frame["type"] == "RUN_FINISHED"
                    ended.add(frame["runId"])
    switches = sum(1 for a, b in itertools.pairwise(order) if a != b)
    assert switches >= 2  # the two runs' events interleave on the one connection


async def test_cancel_over_the_real_runtime_cancels_the_tool_call() -> None:
    with trio.fail_after(60):
        async with slow_tool_service() as (runtime, service), open_service_connection(service.url) as ws:
            await send(ws, run_frame("go", run_id="r1"))
            while (await receive(ws))["type"] != "TOOL_CALL_END":
                pass
            await wait_until(lambda: service.statistics().runs == 1)
            await send(ws, {"type": "cancel", "runId": "r1"})
            events = await until_terminal(ws, "r1")
            await _wait_for_cancelled_execution(runtime)
    terminal = [e for e in events if e["type"] in ("RUN_FINISHED", "RUN_ERROR")]
    assert terminal == [events[-1]]
    assert events[-1]["outcome"] == {"type": "cancelled"}
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert [r["metadata"]["kind"] for r in results] == ["cancelled"]


async def test_a_vanished_clients_run_is_cancelled_once_detach_grace_passes_unresumed() -> None:
    with trio.fail_after(60):
        async with slow_tool_service(detach_grace=0.5) as (runtime, service):
            async with open_service_connection(service.url) as ws:
                await send(ws, run_frame("go", run_id="r1"))
                while (await receive(ws))["type"] != "TOOL_CALL_END":
                    pass
                while (await server_stats(runtime.servers["s1"]))["calls"] != {"sleep": 1}:  # noqa: ASYNC110
                    await trio.sleep(0.05)
            await _wait_for_cancelled_execution(runtime)
            await wait_until(lambda: service.statistics() == service.statistics().__class__(0, 0, False))
            [run] = (await runtime.history((await runtime.threads())[0].thread_id)).runs
    assert (run.run_id, run.outcome) == ("r1", "cancelled")


async def test_the_chat_client_against_the_real_service() -> None:
    readable, raw, refused = io.StringIO(), io.StringIO(), io.StringIO()
    with trio.fail_after(60):
        async with demo_service() as service:  # one service for the three modes: a runtime takes seconds to start
            codes = (
                await chat(SEED_QUESTION, url=service.url, out=readable),
                await chat(SEED_QUESTION, url=service.url, raw=True, out=raw),
                await chat("hi", url=service.url, assistant="nobody", out=refused),
            )
    assert codes == (0, 0, 1)
    printed = readable.getvalue()
    assert '⚙ weather__get {"city":"Beijing"}' in printed
    assert "✓ weather__get" in printed
    assert "✓ clothing__advise" in printed
    assert "北京" in printed
    assert "— answered" in printed
    events = [json.loads(line) for line in raw.getvalue().splitlines()]
    assert (events[0]["type"], events[-1]["type"]) == ("RUN_STARTED", "RUN_FINISHED")
    assert "[unknown_assistant]" in refused.getvalue()
