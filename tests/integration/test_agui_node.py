"""The official ``@ag-ui/client`` ``HttpAgent`` (Node) against ``POST /agui`` of a real ``server.py`` process.

``.ci/run`` installs the client into ``tests/node`` (``npm ci``); on a machine without it these tests are
skipped with that hint, while CI never skips them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.integration.test_service_e2e import SEED_QUESTION, _wait_for_cancelled_execution, slow_tool_service
from tests.service.agui_support import open_agui, run_input
from tests.service.support import wait_until
from tests.support import server_stats
from yao_actors.events import parse_event
from yao_actors.testing import FakeToolCall, Reply, open_fake_openai
from yao_actors.testing.fake_openai import RecordedRequest
from yao_actors.testing.processes import read_line, stop_process

REPO = Path(__file__).resolve().parents[2]
NODE_DIR = REPO / "tests" / "node"

pytestmark = pytest.mark.skipif(
    (shutil.which("node") is None or not (NODE_DIR / "node_modules" / "@ag-ui" / "client").is_dir())
    and os.environ.get("CI") != "true",
    reason="needs Node and @ag-ui/client: run `npm ci --prefix tests/node` (.ci/run does)",
)


@asynccontextmanager
async def server_py(*args: str, **environ: str) -> AsyncIterator[str]:
    """``python server.py`` on a free port (the embedded default, ``environ`` added); yields its http:// base URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "YAO_ACTORS_"))} | environ
    process = await trio.lowlevel.open_process(
        [sys.executable, "server.py", "--port", "0", *args], cwd=REPO, env=env, stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        banner = await read_line(process.stdout)
        match = re.search(r"http://127\.0\.0\.1:\d+", banner)
        assert match, banner
        yield match.group()
    finally:
        await stop_process(process, grace=10)


async def run_http_agent(spec: dict[str, Any]) -> dict[str, Any]:
    """Run ``tests/node/run_agent.mjs``: one ``HttpAgent.runAgent``; returns what the client saw."""
    done = await trio.run_process(
        ["node", "run_agent.mjs", json.dumps(spec)], cwd=NODE_DIR, capture_stdout=True, capture_stderr=True
    )
    output: dict[str, Any] = json.loads(done.stdout)
    for events in output["runs"]:
        for event in events:
            parse_event(event)
    output["stderr"] = done.stderr.decode()
    return output


async def test_the_official_http_agent_gets_the_seeds_answer_and_both_tool_calls() -> None:
    with trio.fail_after(90):
        async with server_py() as base:
            seen = await run_http_agent({"url": f"{base}/agui", "question": SEED_QUESTION, "threadId": "seed"})
            follow_up = await run_http_agent(
                {"url": f"{base}/agui", "question": "谢谢", "threadId": "seed", "messages": seen["messages"]}
            )
    assert "error" not in seen, seen["error"]
    assert "[ag-ui]" not in seen["stderr"], seen["stderr"]  # the client found nothing to strip or repair
    events = seen["events"]
    for event in events:
        parse_event(event)
    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["outcome"] == {"type": "success"}
    assert [e["toolCallName"] for e in events if e["type"] == "TOOL_CALL_START"] == ["weather__get", "clothing__advise"]
    weather = json.loads(next(e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"))
    answer = seen["result"]["text"]
    assert "北京" in answer
    assert str(weather["temp"]) in answer
    # The client built the conversation from the events: both calls, both results, the answer.
    messages = seen["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert messages[-1]["content"] == answer
    # The next run sends that whole conversation back and is answered on the same thread.
    assert "error" not in follow_up, follow_up["error"]
    assert follow_up["events"][-1]["type"] == "RUN_FINISHED"


async def test_closing_the_response_cancels_the_runs_tool_call_in_its_server_process() -> None:
    with trio.fail_after(60):
        async with slow_tool_service() as (runtime, service):
            async with open_agui(service.port, run_input("go", run_id="slow")) as (response, events):
                assert response.status == 200
                async for event in events:
                    if event["type"] == "STEP_FINISHED":  # the model asked for the 30-second tool
                        break
                while (await server_stats(runtime.servers["s1"]))["calls"] != {"sleep": 1}:  # noqa: ASYNC110
                    await trio.sleep(0.05)
            await _wait_for_cancelled_execution(runtime)
            await wait_until(lambda: service.statistics() == service.statistics().__class__(0, 0, False))


def _frontend_model(request: RecordedRequest) -> Reply:
    """A model that asks for the weather and the page's ``show_card`` tool, then answers from both results."""
    messages = request.body["messages"]
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if not results:
        return Reply(
            tool_calls=(
                FakeToolCall("weather__get", '{"city": "Beijing"}', id="c_weather"),
                FakeToolCall("show_card", '{"title": "北京"}', id="c_card"),
            )
        )
    return Reply(text=f"卡片已展示。{' | '.join(results)}")


async def test_a_frontend_tool_round_trip_with_the_official_http_agent() -> None:
    card = {"name": "show_card", "description": "Show a card in the page", "parameters": {"type": "object"}}
    with trio.fail_after(90):
        async with (
            open_fake_openai(_frontend_model) as fake,
            server_py(OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY="test-key", OPENAI_MODEL="fake") as base,
        ):
            seen = await run_http_agent(
                {
                    "url": f"{base}/agui",
                    "question": SEED_QUESTION,
                    "tools": [card],
                    "toolResults": {"show_card": "shown"},
                }
            )
    assert "error" not in seen, seen["error"]
    first, second = seen["runs"]
    assert [e["toolCallName"] for e in first if e["type"] == "TOOL_CALL_START"] == ["weather__get", "show_card"]
    assert [e["toolCallId"] for e in first if e["type"] == "TOOL_CALL_RESULT"] == ["c_weather"]
    assert first[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["c_card"]}
    assert second[-1]["type"] == "RUN_FINISHED"
    assert second[-1]["outcome"] == {"type": "success"}
    offered = [tool["function"]["name"] for tool in fake.requests[0].body["tools"]]
    assert offered == ["weather__get", "clothing__advise", "show_card"]
    # The second run's conversation is the client's (it gives each call an assistant message of its own): the
    # calls, the MCP result, and the page's result.
    sent = fake.requests[1].body["messages"]
    calls = [c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls", ())]
    results = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert calls == ["c_weather", "c_card"]
    assert results["c_card"] == "shown"
    assert '"city":"Beijing"' in results["c_weather"]
    # Every assistant message with tool calls is followed by exactly their tool messages (a model API's rule).
    for index, message in enumerate(sent):
        ids = [c["id"] for c in message.get("tool_calls", ())]
        following = sent[index + 1 : index + 1 + len(ids)]
        assert sorted(m.get("tool_call_id", "") for m in following) == sorted(ids), sent
    assert seen["result"]["text"].startswith("卡片已展示。")
    assert "shown" in seen["result"]["text"]


@pytest.mark.parametrize("approve", [True, False])
async def test_the_official_http_agent_answers_an_approval_interrupt(tmp_path: Path, approve: bool) -> None:
    config = {
        "mcpServers": {
            "weather": {"command": sys.executable, "args": ["-m", "yao_actors.demo.weather"], "approval": True},
            "clothing": {"command": sys.executable, "args": ["-m", "yao_actors.demo.clothing"]},
        },
        "models": {"demo": {"provider": "demo"}},
        "assistants": {"default": {"model": "demo", "mcp": {"servers": ["weather", "clothing"]}}},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with trio.fail_after(90):
        async with server_py("--config", str(path)) as base:
            seen = await run_http_agent({"url": f"{base}/agui", "question": SEED_QUESTION, "approve": approve})
    assert "error" not in seen, seen["error"]
    assert "[ag-ui]" not in seen["stderr"], seen["stderr"]
    held, resumed = seen["runs"][:2]
    (interrupt,) = held[-1]["outcome"]["interrupts"]
    assert interrupt["reason"] == "tool_approval"
    assert [e["type"] for e in held if e["type"] == "TOOL_CALL_RESULT"] == []
    weather = [e for e in resumed if e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] == interrupt["toolCallId"]]
    assert len(weather) == (1 if approve else 0)
    assert seen["runs"][-1][-1]["type"] == "RUN_FINISHED"
    if approve:
        assert "北京" in seen["result"]["text"]


async def test_the_official_http_agent_answers_a_servers_question(tmp_path: Path) -> None:
    """A 2026-07-28 server asks the user through a resolver; the client's resume carries the form's content."""
    booking = {"date": "2027-01-02", "guests": 2, "seat": "aisle"}

    def model(request: RecordedRequest) -> Reply:
        tool = [m for m in request.body["messages"] if m["role"] == "tool"]
        if tool:
            return Reply(text="booked: " + tool[-1]["content"])
        return Reply(tool_calls=(FakeToolCall("asking__book", json.dumps({"hotel": "Grand"}), "c1"),))

    async with open_fake_openai(model) as fake:
        config = {
            "mcpServers": {
                "asking": {"module": "yao_actors.testing.asking:build_asking_server", "protocol": "2026-07-28"}
            },
            "models": {"fake": {"provider": "openai", "base_url": fake.base_url, "model": "f", "api_key_env": None}},
            "assistants": {"default": {"model": "fake", "mcp": {"servers": ["asking"]}}},
        }
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config))
        with trio.fail_after(90):
            async with server_py("--config", str(path)) as base:
                answer = {"action": "accept", "content": booking}
                seen = await run_http_agent({"url": f"{base}/agui", "question": "book", "input": answer})
    assert "error" not in seen, seen["error"]
    asked, answered = seen["runs"][:2]
    (interrupt,) = asked[-1]["outcome"]["interrupts"]
    assert (interrupt["reason"], interrupt["toolCallId"]) == ("input_required", "c1")
    (result,) = [e for e in answered if e["type"] == "TOOL_CALL_RESULT"]
    assert json.loads(result["content"]) == {
        "booked": True,
        "hotel": "Grand",
        **booking,
        "breakfast": False,
        "count": 1,
    }
    assert answered[-1]["type"] == "RUN_FINISHED"
