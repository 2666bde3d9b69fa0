"""Client-side (AG-UI frontend) tools through the runtime: offered, not dispatched, answered by the next run."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests.service.agui_support import post_agui, run_input
from tests.service.support import connected, run_frame, running_service, send, until_terminal
from tests.support import check_stream
from tests.test_runtime_runs import demo_config
from yao_actors.conversation.interrupts.client_tools import NO_CLIENT_RESULT, open_calls
from yao_actors.errors import RunError
from yao_actors.events import Outcome
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.service.protocol import function_tool

SHOW_CARD = function_tool("show_card", "Show a card in the page", {"type": "object", "properties": {"title": {}}})


def _model(seen: list[list[dict[str, Any]]], tools_seen: list[list[str]]) -> FunctionModel:
    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        seen.append([dict(m) for m in messages])
        tools_seen.append([t["function"]["name"] for t in tools])
        if messages[-1]["role"] == "user" and messages[-1]["content"].startswith("北京"):
            return Completion(
                text="我查一下。",
                tool_calls=(
                    ToolCall("c_weather", "weather__get", '{"city": "Beijing"}'),
                    ToolCall("c_card", "show_card", '{"title": "北京"}'),
                ),
            )
        return f"done after {messages[-1]['role']}: {messages[-1]['content']}"

    return FunctionModel(answer)


async def test_a_client_tool_call_ends_the_run_and_its_result_continues_the_loop() -> None:
    seen: list[list[dict[str, Any]]] = []
    tools_seen: list[list[str]] = []
    with trio.fail_after(30):
        async with open_runtime(demo_config("m"), models={"m": _model(seen, tools_seen)}) as runtime:
            first = await runtime.run("default", "北京天气", thread_id="t", client_tools=[SHOW_CARD])
            async with runtime.open_run(
                "default", [{"role": "tool", "tool_call_id": "c_card", "content": "shown"}], thread_id="t"
            ) as stream:
                second = [event async for event in stream]
            history = runtime.conversations.history("t")
    check_stream(first.events)
    check_stream(second)
    # Offered after the assistant's own tools; the model called both.
    assert tools_seen[0] == ["weather__get", "clothing__advise", "show_card"]
    starts = [e["toolCallName"] for e in first.events if e["type"] == "TOOL_CALL_START"]
    assert starts == ["weather__get", "show_card"]
    # Only the MCP call ran; the run ended waiting for the client's result.
    assert [e["toolCallId"] for e in first.events if e["type"] == "TOOL_CALL_RESULT"] == ["c_weather"]
    assert first.outcome is Outcome.CLIENT_TOOLS
    assert first.pending_tool_calls == ("c_card",)
    assert first.events[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["c_card"]}
    # The next run's tool message went to the model after the turn, and the loop went on to an answer.
    assert [m["role"] for m in seen[1][-3:]] == ["assistant", "tool", "tool"]
    assert seen[1][-1] == {"role": "tool", "tool_call_id": "c_card", "content": "shown"}
    assert second[-1]["type"] == "RUN_FINISHED"
    assert second[-1]["result"]["text"] == "done after tool: shown"
    assert open_calls(list(history)) == []


async def test_a_run_that_does_not_answer_the_client_tool_tells_the_model_it_got_no_result() -> None:
    seen: list[list[dict[str, Any]]] = []
    with trio.fail_after(30):
        async with open_runtime(demo_config("m"), models={"m": _model(seen, [])}) as runtime:
            await runtime.run("default", "北京天气", thread_id="t", client_tools=[SHOW_CARD])
            result = await runtime.run("default", "never mind", thread_id="t")
            history = runtime.conversations.history("t")
    assert seen[1][-2:] == [
        {"role": "tool", "tool_call_id": "c_card", "content": NO_CLIENT_RESULT},
        {"role": "user", "content": "never mind"},
    ]
    assert result.text == "done after user: never mind"
    assert open_calls(list(history)) == []


async def test_a_tool_message_answering_no_open_call_is_a_bad_request() -> None:
    seen: list[list[dict[str, Any]]] = []
    with trio.fail_after(30):
        async with open_runtime(demo_config("m"), models={"m": _model(seen, [])}) as runtime:
            result = await runtime.run("default", [{"role": "tool", "tool_call_id": "forged", "content": "x"}])
    assert result.outcome is Outcome.ERROR
    assert result.code == "bad_request"
    assert "'forged'" in (result.error or "")
    assert seen == []


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        pytest.param([function_tool("weather__get", "mine", None)], "collides", id="collides-with-mcp"),
        pytest.param([SHOW_CARD, SHOW_CARD], "given twice", id="twice"),
    ],
)
async def test_client_tools_named_like_the_assistants_are_refused_before_the_run(
    tools: list[dict[str, Any]], message: str
) -> None:
    with trio.fail_after(30):
        async with open_runtime(demo_config("m"), models={"m": _model([], [])}) as runtime:
            with pytest.raises(RunError) as refused:
                async with runtime.open_run("default", "hi", client_tools=tools):
                    pass
    assert refused.value.code == "bad_request"
    assert message in str(refused.value)


async def test_a_client_tool_round_trip_over_the_websocket() -> None:
    card = {"name": "show_card", "description": "Show a card in the page", "parameters": {"type": "object"}}
    seen: list[list[dict[str, Any]]] = []
    with trio.fail_after(30):
        async with connected(demo_config("m"), _model(seen, [])) as (_, ws):
            await send(ws, run_frame("北京天气", run_id="r1", thread_id="t", tools=[card]))
            first = await until_terminal(ws, "r1")
            answer = {"role": "tool", "toolCallId": "c_card", "content": "shown"}
            await send(ws, {"type": "run", "runId": "r2", "threadId": "t", "messages": [answer], "tools": [card]})
            second = await until_terminal(ws, "r2")
    check_stream(first)
    check_stream(second)
    assert first[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["c_card"]}
    assert second[-1]["result"]["text"] == "done after tool: shown"


async def test_a_client_tool_named_like_an_mcp_tool_is_a_400_over_http() -> None:
    clash = {"name": "weather__get", "description": "mine"}
    with trio.fail_after(30):
        async with (
            open_runtime(demo_config("m"), models={"m": _model([], [])}) as runtime,
            running_service(runtime) as service,
        ):
            response = await post_agui(service.port, run_input("北京天气", tools=[clash]))
    assert response.status == 400
    assert response.json()["error"]["code"] == "bad_request"
    assert "collides" in response.json()["error"]["message"]
