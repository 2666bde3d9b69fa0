"""Runs through the public API: open_runtime(config, models=...), Runtime.run and Runtime.open_run."""

from __future__ import annotations

import pytest
import trio

from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec, StdioTransport
from yao_actors.demo import clothing, weather
from yao_actors.errors import ConfigError, RunError
from yao_actors.events import Outcome, parse_event
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import open_runtime


def demo_config(model: str = "demo") -> Config:
    servers = {
        "weather": ServerSpec("weather", InMemoryTransport(weather.build_server())),
        "clothing": ServerSpec("clothing", InMemoryTransport(clothing.build_server())),
    }
    assistant = AssistantSpec("default", model, ("Be helpful.",), (ServerRef("weather"), ServerRef("clothing")))
    return Config(servers=servers, assistants={"default": assistant})


async def test_builtin_demo_model_answers_in_chinese() -> None:
    with trio.fail_after(30):
        async with open_runtime(demo_config()) as runtime:
            result = await runtime.run("default", "北京今天适合穿什么?")
    assert result.outcome == Outcome.ANSWERED
    assert [r.name for r in result.tool_results] == ["weather__get", "clothing__advise"]
    assert all(r.ok for r in result.tool_results)
    assert "3°C" in result.text
    assert "北京" in result.text
    types = [event["type"] for event in result.events]
    assert types[0] == "RUN_STARTED"
    assert types[-1] == "RUN_FINISHED"
    assert types.count("TOOL_CALL_RESULT") == 2
    for event in result.events:
        parse_event(event)


async def test_models_argument_plugs_in_a_users_model() -> None:
    def script(messages: object, tools: object) -> Completion:
        assert isinstance(messages, list | tuple)
        if messages[-1]["role"] == "tool":
            return Completion(text=f"got {messages[-1]['content']}")
        return Completion(tool_calls=(ToolCall("c1", "weather__get", '{"city": "Tokyo"}'),))

    model = FunctionModel(script, name="mine")
    with trio.fail_after(30):
        async with open_runtime(demo_config("mine"), models={"mine": model}) as runtime:
            result = await runtime.run("default", [{"role": "user", "content": "weather in Tokyo?"}])
    assert result.text.startswith('got {"city":"Tokyo"')
    assert len(model.calls) == 2


async def test_open_run_streams_events_and_threads_keep_history() -> None:
    with trio.fail_after(30):
        async with open_runtime(demo_config()) as runtime:
            async with runtime.open_run("default", "What should I wear in London today?") as stream:
                events = [event async for event in stream]
            thread = stream.thread_id
            again = await runtime.run("default", "北京今天适合穿什么?", thread_id=thread)
            history = runtime.conversations.history(thread)
    assert events[-1]["type"] == "RUN_FINISHED"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert again.thread_id == thread
    users = [m["content"] for m in history if m["role"] == "user"]
    assert users == ["What should I wear in London today?", "北京今天适合穿什么?"]


async def test_unknown_assistant_is_a_run_error() -> None:
    async with open_runtime(demo_config()) as runtime:
        with pytest.raises(RunError) as caught:
            await runtime.run("nope", "hi")
    assert caught.value.code == "unknown_assistant"


async def test_unknown_model_is_refused_before_anything_starts() -> None:
    with pytest.raises(ConfigError, match=r"assistants\.default\.model: unknown model 'gpt-9'"):
        async with open_runtime(demo_config("gpt-9")):
            pass


async def test_a_server_that_cannot_start_leaves_the_runtime_serving() -> None:
    config = demo_config()
    broken = ServerSpec("weather", StdioTransport("/nonexistent/weather-server"))
    config = Config(servers={**config.servers, "weather": broken}, assistants=config.assistants)
    with trio.fail_after(30):
        async with open_runtime(config) as runtime:
            stats = runtime.servers["weather"].statistics()
            advice = await runtime.servers["clothing"].call_tool("advise", {"temp": 3, "wind": 4})
            result = await runtime.run("default", "北京今天适合穿什么?")
    assert stats.last_error is not None
    assert "/nonexistent/weather-server" in stats.last_error
    assert advice.ok
    assert "advice" in advice.result
    # The down server's tools are not offered, so the demo model says what it cannot do instead of calling them.
    assert result.outcome == Outcome.ANSWERED
    assert result.tool_results == ()
    assert "weather" in result.text
