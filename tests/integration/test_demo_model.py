"""The demo model plays the seed's scenario against the real demo MCP servers, run as stdio subprocesses.

The conversation actor is not involved: the test drives the turns itself with
the raw ``mcp.Client``, the way the runtime does (flat names ``server__tool``,
tool messages rendered by ``tool_message_content``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import mcp
import trio
from mcp.client.stdio import StdioServerParameters

from yao_actors.demo.clothing import advise
from yao_actors.demo.model import DemoModel
from yao_actors.demo.weather import lookup
from yao_actors.models import Completion
from yao_actors.tools.results import ToolCallResult, parse_content, tool_message_content


async def _tool_message(client: mcp.Client, name: str, call_id: str, arguments: str) -> dict[str, Any]:
    result = await client.call_tool(name.partition("__")[2], json.loads(arguments))
    parsed = parse_content(result.content)
    error = str(parsed) if result.is_error else None
    outcome = ToolCallResult(call_id, name, "", "", arguments, result=parsed, error=error)
    return {"role": "tool", "tool_call_id": call_id, "content": tool_message_content(outcome)}


@asynccontextmanager
async def _open_demo_servers() -> AsyncIterator[tuple[dict[str, mcp.Client], list[dict[str, Any]]]]:
    """Both demo servers as stdio subprocesses: their clients by server id, and the tools a model sees."""
    async with AsyncExitStack() as stack:
        clients: dict[str, mcp.Client] = {}
        tools: list[dict[str, Any]] = []
        for server in ("weather", "clothing"):
            params = StdioServerParameters(command=sys.executable, args=["-m", f"yao_actors.demo.{server}"])
            client = await stack.enter_async_context(mcp.Client(params))
            clients[server] = client
            for tool in (await client.list_tools()).tools:
                function = {"name": f"{server}__{tool.name}", "parameters": tool.input_schema}
                tools.append({"type": "function", "function": function})
        yield clients, tools


async def _play(clients: dict[str, mcp.Client], tools: list[dict[str, Any]], question: str) -> list[Completion]:
    """Run the demo model until it answers in text; its completions, turn by turn."""
    model = DemoModel()
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    completions = []
    for _turn in range(5):
        completion = await model.complete(messages, tools)
        completions.append(completion)
        messages.append(completion.to_message())
        if not completion.tool_calls:
            return completions
        for call in completion.tool_calls:
            client = clients[call.name.partition("__")[0]]
            messages.append(await _tool_message(client, call.name, call.id, call.arguments))
    raise AssertionError(f"the demo never answered: {messages}")


SCENARIOS = [("北京今天适合穿什么?", "Beijing", "zh"), ("What should I wear in London today?", "London", "en")]


async def test_demo_scenario_in_chinese_and_english_over_real_stdio_servers() -> None:
    with trio.fail_after(60):
        async with _open_demo_servers() as (clients, tools):
            played = [await _play(clients, tools, question) for question, _city, _lang in SCENARIOS]
    for completions, (_question, city, lang) in zip(played, SCENARIOS, strict=True):
        assert [[c.name for c in completion.tool_calls] for completion in completions] == [
            ["weather__get"],
            ["clothing__advise"],
            [],
        ]
        weather = lookup(city)
        advice = advise(weather["temp"], weather["wind"], lang)["advice"]
        answer = completions[-1].text
        assert f"{weather['temp']}°C" in answer
        assert advice in answer
        assert ("北京" in answer) if lang == "zh" else (city in answer)
