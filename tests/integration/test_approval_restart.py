"""A pending approval survives a restart: a real ``server.py`` process on an SQLite store ends a run on an approval
interrupt, is stopped with ``SIGTERM`` and started again on the same store, and the resume runs the held call.

Once over the websocket protocol and once over ``POST /agui``. The model is the fake OpenAI-compatible endpoint
(every request it got is recorded); the tool is the test MCP server's ``echo``, a stdio subprocess of the service
configured ``approval: ["echo"]``, so its result in the resumed run is the real server's answer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

from tests.integration.processes import interrupted_across_a_restart, service_process, stop, write_config
from tests.integration.workers_support import port_of
from tests.service.agui_support import AguiResponse, post_agui, run_input
from tests.support import check_stream
from yao_actors.testing.fake_openai import FakeToolCall, RecordedRequest, Reply, open_fake_openai

GUARD = 90
#: The test MCP server, its ``echo`` held for approval.
SERVERS = {"test": {"command": sys.executable, "args": ["-m", "yao_actors.testing.servers"], "approval": ["echo"]}}
QUESTION = "北京天气怎么样?"


def model(request: RecordedRequest) -> Reply:
    """The question asks for ``echo`` (call ``c1``); anything else is answered with the tool results it carries."""
    last = request.body["messages"][-1]
    if last["role"] == "user" and last["content"] == QUESTION:
        return Reply(
            tool_calls=(FakeToolCall("test__echo", json.dumps({"text": "北京 3°C"}, ensure_ascii=False), "c1"),)
        )
    results = [m["content"] for m in request.body["messages"] if m["role"] == "tool"]
    return Reply(text="答: " + " | ".join(results))


def numbered(response: AguiResponse) -> list[dict[str, Any]]:
    """An SSE answer's events with their ``seq`` (each event's SSE ``id``), checked like the websocket's."""
    assert response.status == 200, response.body
    return [{**event, "seq": int(sse_id)} for event, sse_id in zip(response.events, response.ids, strict=True)]


def the_interrupt(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The run ended on the held ``echo`` call, which did not run."""
    check_stream(events)
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED", finished
    assert finished["outcome"]["type"] == "interrupt"
    (interrupt,) = finished["outcome"]["interrupts"]
    assert (interrupt["reason"], interrupt["toolCallId"]) == ("tool_approval", "c1")
    assert [e for e in events if e["type"] == "TOOL_CALL_RESULT"] == []
    return dict(interrupt)


def the_resumed_run(events: list[dict[str, Any]], echoed: str) -> None:
    """The held call ran at the real server with ``echoed`` as its text, and the run finished with its answer."""
    check_stream(events)
    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == "c1"
    assert json.loads(result["content"]) == {"text": echoed}
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["outcome"] == {"type": "success"}
    assert echoed in events[-1]["result"]["text"]


def the_model_got_the_result(request: RecordedRequest, echoed: str) -> None:
    conversation = [m for m in request.body["messages"] if m["role"] != "system"]
    assert [m["role"] for m in conversation] == ["user", "assistant", "tool"]
    assert conversation[0]["content"] == QUESTION
    assert conversation[1]["tool_calls"][0]["id"] == "c1"
    assert conversation[2]["tool_call_id"] == "c1"
    assert echoed in conversation[2]["content"]


async def test_an_approval_survives_sigterm_and_restart_over_the_websocket(tmp_path: Path) -> None:
    edited = {"approved": True, "arguments": {"text": "上海 5°C"}}
    with trio.fail_after(GUARD):
        async with open_fake_openai(model) as fake:
            config = write_config(tmp_path, fake.base_url, SERVERS)
            second, stale = await interrupted_across_a_restart(config, QUESTION, the_interrupt, edited)
    the_resumed_run(second, "上海 5°C")
    the_model_got_the_result(fake.requests[-1], "上海 5°C")
    assert len(fake.requests) == 2  # the question, then the resumed run's one request
    assert (stale[-1]["type"], stale[-1]["code"]) == ("RUN_ERROR", "unknown_interrupt")


async def test_an_approval_survives_sigterm_and_restart_over_http(tmp_path: Path) -> None:
    question = {"id": "u1", "role": "user", "content": QUESTION}
    with trio.fail_after(GUARD):
        async with open_fake_openai(model) as fake:
            config = write_config(tmp_path, fake.base_url, SERVERS)
            async with service_process(config) as (process, url):
                first = await post_agui(port_of(url), run_input(thread_id="t1", run_id="r1", messages=[question]))
                assert await stop(process) == 0
            interrupt = the_interrupt(numbered(first))
            # What an AG-UI client holds of the conversation: the question and the assistant's (held) call.
            (start,) = [e for e in first.events if e["type"] == "TOOL_CALL_START"]
            arguments = "".join(e["delta"] for e in first.events if e["type"] == "TOOL_CALL_ARGS")
            call = {
                "id": start["toolCallId"],
                "type": "function",
                "function": {"name": "test__echo", "arguments": arguments},
            }
            conversation = [question, {"id": "a1", "role": "assistant", "toolCalls": [call]}]
            resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}]
            async with service_process(config) as (process, url):
                second = await post_agui(
                    port_of(url), run_input(thread_id="t1", run_id="r2", messages=conversation, resume=resume)
                )
                stale = await post_agui(
                    port_of(url), run_input(thread_id="t1", run_id="r3", messages=conversation, resume=resume)
                )
                assert await stop(process) == 0
    the_resumed_run(numbered(second), "北京 3°C")
    the_model_got_the_result(fake.requests[-1], "北京 3°C")
    assert len(fake.requests) == 2
    assert (stale.events[-1]["type"], stale.events[-1]["code"]) == ("RUN_ERROR", "unknown_interrupt")
