"""What a tool returns, as the model sees it (issue 33), over real parts: our result server as a stdio subprocess,
the fake OpenAI endpoint over loopback HTTP, and the request the model receives checked on the wire."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from tests.support import check_stream, open_manager
from yao_actors.config import AssistantSpec, Config, ModelSpec, RestartPolicy, ServerRef, ServerSpec, StdioTransport
from yao_actors.conversation import ConversationManager
from yao_actors.errors import ErrorKind
from yao_actors.events import Outcome
from yao_actors.models.openai import OpenAIModel
from yao_actors.runtime import open_runtime
from yao_actors.specs import ResultBudget
from yao_actors.testing import FakeToolCall, Reply, open_fake_openai
from yao_actors.testing.fake_openai import FakeOpenAI
from yao_actors.testing.result_servers import TINY_PNG
from yao_actors.tools.budget import format_size


def result_server(server_id: str = "r") -> ServerSpec:
    return ServerSpec(server_id, StdioTransport(sys.executable, ("-m", "yao_actors.testing.result_servers")))


def openai_model(base_url: str, **model: Any) -> OpenAIModel:
    spec = ModelSpec(id="m", provider="openai", base_url=base_url, model="fake", api_key_env=None, **model)
    return OpenAIModel(spec)


@asynccontextmanager
async def open_results_run(
    script: Any, server: ServerSpec | None = None, model: dict[str, Any] | None = None, **options: Any
) -> AsyncIterator[tuple[FakeOpenAI, ConversationManager]]:
    """Assistant ``a`` over ``server`` (default: the result server over stdio) as ``r``, its model (options
    ``model``) the fake endpoint playing ``script``."""
    spec = AssistantSpec(id="a", model="m", servers=(ServerRef("r"),), **options)
    async with (
        open_fake_openai(script) as fake,
        open_runtime(Config(servers={"r": server or result_server()})) as runtime,
        open_manager(runtime.servers, openai_model(fake.base_url, **(model or {})), spec) as manager,
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


PICTURE_CALLS = (
    FakeToolCall("r__picture", "{}", "p1"),
    FakeToolCall("r__sound", "{}", "s1"),
    FakeToolCall("r__picture", "{}", "p2"),
)


async def run_pictures(**model: Any) -> tuple[FakeOpenAI, list[dict[str, Any]]]:
    with trio.fail_after(60):
        async with open_results_run([Reply(tool_calls=PICTURE_CALLS), Reply(text="seen")], model=model) as (fake, m):
            result = await m.run("a", "show me")
    check_stream(list(result.events))
    assert result.text == "seen"
    return fake, list(result.events)


async def test_a_vision_model_gets_the_images_after_the_tool_messages_never_in_them() -> None:
    fake, events = await run_pictures(vision=True, max_images=1)
    messages = fake.requests[1].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "tool", "user"]
    assert TINY_PNG not in json.dumps(messages[:5])
    size = len(base64.b64decode(TINY_PNG))
    assert messages[2]["content"] == f'["a tiny picture","[image image/png, {size} B, sent below]"]'
    assert messages[3]["content"] == '"[audio audio/wav, 64 B]"'
    assert messages[4]["content"] == f'["a tiny picture","[image image/png, {size} B]"]'  # past max_images
    images = [part for part in messages[5]["content"] if part["type"] == "image_url"]
    assert images == [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{TINY_PNG}"}}]
    media = {e["toolCallId"]: e["metadata"].get("media") for e in events if e["type"] == "TOOL_CALL_RESULT"}
    assert media["p1"] == [{"type": "image", "mimeType": "image/png", "data": TINY_PNG}]  # for the page
    assert media["s1"][0]["type"] == "audio"


async def test_a_model_without_vision_gets_placeholders_only() -> None:
    fake, _events = await run_pictures()
    body = json.dumps(fake.requests[1].body)
    assert TINY_PNG not in body
    assert "image_url" not in body
    assert [m["role"] for m in fake.requests[1].body["messages"]] == ["user", "assistant", "tool", "tool", "tool"]


async def test_structured_output_reaches_the_model_once_and_a_mismatch_is_the_tools_error() -> None:
    calls = (
        FakeToolCall("r__forecast", json.dumps({"city": "Oslo"}), "good"),
        FakeToolCall("r__bad_forecast", json.dumps({"city": "Oslo"}), "bad"),
    )
    with trio.fail_after(60):
        async with open_results_run([Reply(tool_calls=calls), Reply(text="ok")], max_turn=1) as (fake, manager):
            result = await manager.run("a", "forecast")
    check_stream(list(result.events))
    sent = {m["tool_call_id"]: m["content"] for m in tool_messages(fake.requests[1].body)}
    assert sent["good"] == '{"city":"Oslo","temp":3.5}'
    assert sent["bad"] == (
        "Error: the tool's structuredContent does not match its outputSchema: temp: 'warm' is not of type 'number'"
    )
    good, bad = result.tool_results
    assert good.structured
    assert bad.kind is ErrorKind.TOOL_ERROR  # the server answered: it is not unavailable
    events = {e["toolCallId"]: e for e in result.events if e["type"] == "TOOL_CALL_RESULT"}
    assert events["good"]["metadata"]["structured"] is True
    assert events["good"]["content"] == sent["good"]
    assert events["bad"]["metadata"]["kind"] == "tool_error"


async def test_a_read_only_call_lost_with_its_connection_is_retried_once_a_destructive_one_never(
    tmp_path: Path,
) -> None:
    calls = (
        FakeToolCall("r__flaky_read", json.dumps({"marker": str(tmp_path / "read")}), "read"),
        FakeToolCall("r__flaky_write", json.dumps({"marker": str(tmp_path / "write")}), "write"),
    )
    server = attrs.evolve(result_server(), restart=RestartPolicy(backoff_initial=0.05), dispatch="sequential")
    with trio.fail_after(60):
        async with open_results_run([Reply(tool_calls=calls), Reply(text="ok")], server) as (fake, manager):
            result = await manager.run("a", "read, then write")
    check_stream(list(result.events))
    read, write = result.tool_results
    assert (read.result, read.reconnected, read.kind) == ("read", True, None)
    assert write.kind is ErrorKind.SERVER_UNAVAILABLE  # not retried: it may have written before the loss
    assert not write.reconnected
    assert (tmp_path / "read").exists()
    assert (tmp_path / "write").exists()
    sent = {m["tool_call_id"]: m["content"] for m in tool_messages(fake.requests[1].body)}
    assert sent["read"] == '"read"'
    assert sent["write"].startswith("Error: ")
    reconnected = {
        e["toolCallId"]: e["metadata"].get("reconnected") for e in result.events if e["type"] == "TOOL_CALL_RESULT"
    }
    assert reconnected == {"read": True, "write": None}
