"""A server's question survives ``kill -9`` of the service: a real ``server.py`` on SQLite ends a run on an
``input_required`` interrupt of a 2026-07-28 server, is killed, started again on the same store, and the resume
completes the call — exactly once, as the server's own count shows.

The MCP server is the asking server over streamable HTTP in its own process (it lives on while the service dies);
the model is the fake OpenAI-compatible endpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.integration.actor_checks import running
from tests.integration.asking_support import http_asking_server
from tests.integration.processes import interrupted_across_a_restart, write_config
from tests.integration.test_input_interrupts import BOOKING
from tests.support import check_stream
from yao_actors.config import ServerSpec
from yao_actors.testing.fake_openai import FakeToolCall, RecordedRequest, Reply, open_fake_openai

pytestmark = pytest.mark.filterwarnings(r"ignore:Async generator '(httpx2|httpcore2)\.:ResourceWarning")

QUESTION = "Book the Grand for me"


def model(request: RecordedRequest) -> Reply:
    last = request.body["messages"][-1]
    if last["role"] == "user" and last["content"] == QUESTION:
        return Reply(tool_calls=(FakeToolCall("asking__book", json.dumps({"hotel": "Grand"}), "c1"),))
    return Reply(text=" | ".join(m["content"] for m in request.body["messages"] if m["role"] == "tool"))


async def test_a_question_survives_kill_9_and_its_call_completes_exactly_once(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with http_asking_server() as server, open_fake_openai(model) as fake:
            servers = {"asking": {"url": server.url, "protocol": "2026-07-28"}}
            config = write_config(tmp_path, fake.base_url, servers)
            payload: dict[str, Any] = {"action": "accept", "content": BOOKING}
            second, stale = await interrupted_across_a_restart(config, QUESTION, the_question, payload, kill_9=True)
            async with running(ServerSpec("asking", server, protocol="2026-07-28")) as handle:
                count = await handle.call_tool("bookings", {})
    check_stream(second)
    (result,) = [e for e in second if e["type"] == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == "c1"
    assert json.loads(result["content"]) == {"booked": True, "hotel": "Grand", **BOOKING, "count": 1}
    assert second[-1]["type"] == "RUN_FINISHED"
    assert (stale[-1]["type"], stale[-1]["code"]) == ("RUN_ERROR", "unknown_interrupt")
    assert count.result == {"count": 1}


def the_question(events: list[dict[str, Any]]) -> dict[str, Any]:
    check_stream(events)
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED", finished
    (interrupt,) = finished["outcome"]["interrupts"]
    assert (interrupt["reason"], interrupt["toolCallId"]) == ("input_required", "c1")
    assert set(interrupt["responseSchema"]["properties"]) == {"date", "guests", "seat", "breakfast"}
    return dict(interrupt)
