"""The fake OpenAI endpoint speaks the real wire format: checked raw, and by the official ``openai`` package.

The official client is an independent parser of the Chat Completions stream:
whatever it assembles from the fake's stream must equal what our own client
assembles from the same script.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx2
import openai
import pytest
import trio

from yao_actors.config import ModelSpec
from yao_actors.models import Completion, OpenAIModel, ToolCall, Usage
from yao_actors.testing import FakeToolCall, Reply, open_fake_openai

MESSAGES = [{"role": "user", "content": "What should I wear in Beijing?"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": name,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    for name in ("weather__get", "clothing__advise", "time__now")
]

SCRIPTS = {
    "text": Reply(text="It is 3°C in Beijing: wear a warm coat.", usage=Usage(21, 9, 30)),
    "reasoning": Reply(reasoning="The user asks about clothes; weather first.", text="Let me check."),
    "one tool call": Reply(tool_calls=(FakeToolCall("weather__get", '{"city": "Beijing"}'),)),
    "three interleaved": Reply(
        text="Checking three things.",
        tool_calls=(
            FakeToolCall("weather__get", '{"city": "Beijing"}'),
            FakeToolCall("clothing__advise", '{"temp": 3, "wind": 4, "lang": "en"}'),
            FakeToolCall("time__now", "{}"),
        ),
        interleave=True,
        chunk_size=3,
    ),
}


def _spec(base_url: str, *, stream: bool = True) -> ModelSpec:
    return ModelSpec(id="m", provider="openai", base_url=base_url, model="gpt-fake", api_key_env=None, stream=stream)


def _from_openai(completion: Any) -> Completion:
    """Our ``Completion`` from the official package's assembled ``ChatCompletion``."""
    choice = completion.choices[0]
    message = choice.message
    calls = tuple(
        ToolCall(id=call.id, name=call.function.name, arguments=call.function.arguments)
        for call in message.tool_calls or ()
    )
    usage = completion.usage
    return Completion(
        text=message.content or "",
        tool_calls=calls,
        finish_reason=choice.finish_reason,
        usage=Usage(usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) if usage else None,
        reasoning=(message.model_extra or {}).get("reasoning_content"),
    )


def _official_stream(base_url: str) -> Completion:
    """The official client's own stream accumulation (its sync client, run in a thread)."""
    with (
        openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0) as client,
        client.chat.completions.stream(
            model="gpt-fake", messages=MESSAGES, tools=TOOLS, stream_options={"include_usage": True}
        ) as stream,
    ):
        for _event in stream:
            pass
        return _from_openai(stream.get_final_completion())


def _official_whole(base_url: str) -> Completion:
    with openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0) as client:
        return _from_openai(client.chat.completions.create(model="gpt-fake", messages=MESSAGES))


@pytest.mark.parametrize("name", list(SCRIPTS))
async def test_official_client_assembles_the_same_stream(name: str) -> None:
    reply = SCRIPTS[name]
    with trio.fail_after(20):
        async with open_fake_openai([reply]) as fake:
            ours = await OpenAIModel(_spec(fake.base_url)).complete(MESSAGES, TOOLS)
        async with open_fake_openai([reply]) as fake:
            theirs = await trio.to_thread.run_sync(_official_stream, fake.base_url)
    assert ours == theirs
    assert ours.tool_calls == tuple(
        ToolCall(f"call_fake_1_{i}", call.name, call.arguments) for i, call in enumerate(reply.tool_calls)
    )


@pytest.mark.parametrize("name", list(SCRIPTS))
async def test_official_client_reads_the_same_non_streamed_answer(name: str) -> None:
    reply = SCRIPTS[name]
    with trio.fail_after(20):
        async with open_fake_openai([reply]) as fake:
            ours = await OpenAIModel(_spec(fake.base_url, stream=False)).complete(MESSAGES, TOOLS)
        async with open_fake_openai([reply]) as fake:
            theirs = await trio.to_thread.run_sync(_official_whole, fake.base_url)
    assert ours == theirs
    assert ours.text == reply.text


async def _raw_stream(base_url: str, body: dict[str, Any]) -> tuple[httpx2.Response, str]:
    async with httpx2.AsyncClient() as client:
        response = await client.post(base_url + "/chat/completions", json=body)
    return response, response.text


async def test_wire_format_is_openai_chunks_then_usage_then_done() -> None:
    body = {"model": "gpt-fake", "messages": MESSAGES, "stream": True, "stream_options": {"include_usage": True}}
    with trio.fail_after(20):
        async with open_fake_openai([SCRIPTS["three interleaved"]]) as fake:
            response, text = await _raw_stream(fake.base_url, body)
    assert response.headers["content-type"] == "text/event-stream"
    events = text.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    chunks = [json.loads(event.removeprefix("data: ")) for event in events[:-2]]
    assert all(event.startswith("data: {") for event in events[:-2])
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    indices = [
        chunk["choices"][0]["delta"]["tool_calls"][0]["index"]
        for chunk in chunks
        if chunk["choices"] and "tool_calls" in chunk["choices"][0]["delta"]
    ]
    assert indices[:6] == [0, 1, 2, 0, 1, 2]


async def test_no_usage_chunk_unless_asked() -> None:
    body = {"model": "gpt-fake", "messages": MESSAGES, "stream": True}
    with trio.fail_after(20):
        async with open_fake_openai([SCRIPTS["text"]]) as fake:
            _response, text = await _raw_stream(fake.base_url, body)
    chunks = [json.loads(e.removeprefix("data: ")) for e in text.split("\n\n")[:-2]]
    assert all(chunk["choices"] for chunk in chunks)
    assert all("usage" not in chunk for chunk in chunks)


async def test_requests_are_recorded_and_unknown_routes_and_exhausted_scripts_refused() -> None:
    with trio.fail_after(20):
        async with open_fake_openai([SCRIPTS["text"]]) as fake, httpx2.AsyncClient() as client:
            first = await client.post(
                fake.base_url + "/chat/completions", json={"model": "x", "messages": []}, headers={"X-Trace": "1"}
            )
            lost = await client.get(fake.base_url + "/models")
            exhausted = await client.post(fake.base_url + "/chat/completions", json={"model": "x"})
    assert first.status_code == 200
    assert first.json()["object"] == "chat.completion"
    assert lost.status_code == 404
    assert exhausted.status_code == 400
    assert "exhausted" in exhausted.json()["error"]["message"]
    assert [(r.method, r.path) for r in fake.requests] == [
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
    ]
    assert fake.requests[0].headers["x-trace"] == "1"
    assert fake.requests[0].body == {"model": "x", "messages": []}


async def test_script_may_be_a_function_of_the_request() -> None:
    def echo(request: Any) -> Reply:
        return Reply(text=request.body["messages"][-1]["content"].upper())

    with trio.fail_after(20):
        async with open_fake_openai(echo) as fake:
            completion = await OpenAIModel(_spec(fake.base_url)).complete([{"role": "user", "content": "hi"}], [])
    assert completion.text == "HI"


async def test_error_reply_has_openai_error_body_and_retry_after() -> None:
    with trio.fail_after(20):
        script = [Reply.http_error(429, "slow down", retry_after="3")]
        async with open_fake_openai(script) as fake, httpx2.AsyncClient() as client:
            response = await client.post(fake.base_url + "/chat/completions", json={"stream": True})
    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    assert response.json()["error"]["message"] == "slow down"


async def test_chunk_delay_paces_the_stream(autojump_clock: trio.abc.Clock) -> None:
    arrivals: list[float] = []

    async def on_delta(delta: Any) -> None:
        arrivals.append(trio.current_time())

    reply = Reply(text="abcdef", chunk_size=2, chunk_delay=1.5)
    with trio.fail_after(60):
        async with open_fake_openai([reply]) as fake:
            await OpenAIModel(_spec(fake.base_url)).complete(MESSAGES, [], on_delta=on_delta)
    assert [round(later - earlier, 6) for earlier, later in itertools.pairwise(arrivals)] == [1.5, 1.5]
