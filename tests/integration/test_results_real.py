"""What a tool returns, as the model sees it (issue 33), over real parts: our result server as a stdio subprocess,
the fake OpenAI endpoint over loopback HTTP, and the request the model receives checked on the wire."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from tests.support import check_stream, open_manager
from yao_actors.config import AssistantSpec, Config, ModelSpec, ServerRef, ServerSpec, StdioTransport
from yao_actors.conversation import ConversationManager
from yao_actors.events import Outcome
from yao_actors.models.openai import OpenAIModel
from yao_actors.runtime import open_runtime
from yao_actors.specs import ResultBudget
from yao_actors.testing import FakeToolCall, Reply, open_fake_openai
from yao_actors.testing.fake_openai import FakeOpenAI
from yao_actors.tools.budget import format_size


def result_server(server_id: str = "r") -> ServerSpec:
    return ServerSpec(server_id, StdioTransport(sys.executable, ("-m", "yao_actors.testing.result_servers")))


def openai_model(base_url: str) -> OpenAIModel:
    return OpenAIModel(ModelSpec(id="m", provider="openai", base_url=base_url, model="fake", api_key_env=None))


@asynccontextmanager
async def open_results_run(script: Any, **options: Any) -> AsyncIterator[tuple[FakeOpenAI, ConversationManager]]:
    """Assistant ``a`` over the result server (stdio), its model the fake endpoint playing ``script``."""
    spec = AssistantSpec(id="a", model="m", servers=(ServerRef("r"),), **options)
    async with (
        open_fake_openai(script) as fake,
        open_runtime(Config(servers={"r": result_server()})) as runtime,
        open_manager(runtime.servers, openai_model(fake.base_url), spec) as manager,
    ):
        yield fake, manager


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]


async def test_a_result_of_hundreds_of_kb_reaches_the_model_cut_and_stays_whole_elsewhere() -> None:
    calls = (
        FakeToolCall("r__blob", json.dumps({"size": 300_000}), "big"),
        FakeToolCall("r__blob", json.dumps({"size": 200_000, "shape": "lines"}), "lines"),
        FakeToolCall("r__blob", json.dumps({"size": 500}), "small"),
    )
    script = [Reply(tool_calls=calls), Reply(text="done"), Reply(text="again")]
    budget = ResultBudget(per_result=32768, per_turn=40000)
    with trio.fail_after(60):
        async with open_results_run(script, result_budget=budget) as (fake, manager):
            result = await manager.run("a", "get the blobs", thread_id="t")
            again = await manager.run("a", "and now?", thread_id="t")
    check_stream(list(result.events))
    assert result.outcome is Outcome.ANSWERED
    assert again.text == "again"
    sent = {m["tool_call_id"]: m["content"] for m in tool_messages(fake.requests[1].body)}
    assert "[cut:" not in sent["small"]
    assert sum(map(len, sent.values())) <= 40000
    assert json.loads(sent["small"])  # a small result is whole JSON
    big = sent["big"]
    assert big.endswith("first 19 KB shown; ask the tool for less (a narrower query, a page, a range) to see the rest]")
    events = {e["toolCallId"]: e["content"] for e in result.events if e["type"] == "TOOL_CALL_RESULT"}
    assert f"[cut: {format_size(len(events['big']))} result" in big
    assert big.split("\n… [cut:")[0].endswith("}")  # after a whole record
    assert sent["lines"].split("\n… [cut:")[0].endswith("lazy dog\\n")  # a text result is a JSON string: whole lines
    assert len(events["big"]) >= 250_000
    assert "[cut:" not in events["big"]
    history = {m["tool_call_id"]: m["content"] for m in tool_messages(fake.requests[2].body)}
    assert history == sent  # the next run's request: cut the same way, from the whole history
