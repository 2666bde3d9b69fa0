"""The embedder's API (issue 12, items 4-11): success you can test, readiness, threads, scripted models, progress
callbacks, disabled servers, and models given only to ``open_runtime``. Servers are the test server in memory; the
runtime reaches them through ``connect=`` (no monkeypatching)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp
import pytest
import trio

import yao_actors
from tests.support import noting_connector
from yao_actors import (
    AssistantSpec,
    Completion,
    Config,
    ErrorKind,
    FunctionModel,
    InMemoryTransport,
    NotReady,
    Outcome,
    ServerHandle,
    ServerRef,
    ServerSpec,
    ServerState,
    ToolCall,
    open_runtime,
)
from yao_actors.config import RestartPolicy
from yao_actors.errors import ConfigError
from yao_actors.testing.servers import build_test_server
from yao_actors.transports import Link, open_client


def server(server_id: str, **changes: Any) -> ServerSpec:
    return ServerSpec(server_id, InMemoryTransport(build_test_server(server_id)), **changes)


@asynccontextmanager
async def flaky_connect(spec: ServerSpec, *, link: Link, **kwargs: Any) -> AsyncIterator[mcp.Client]:
    """Servers whose id starts with ``down`` refuse every connection; the others connect for real."""
    if spec.id.startswith("down"):
        raise ConnectionRefusedError(f"{spec.id} refuses connections")
    async with open_client(spec, link=link, **kwargs) as client:
        yield client


def config(*servers: ServerSpec, model: str = "scripted", **assistant: Any) -> Config:
    refs = tuple(ServerRef(s.id) for s in servers)
    spec = AssistantSpec("a", model, prompt="Be brief", servers=refs, **assistant)
    return Config(servers={s.id: s for s in servers}, assistants={"a": spec})


def calls_then_answers(*calls: ToolCall, answer: str = "done") -> FunctionModel:
    """Calls ``calls`` in the first turn, then answers ``answer``."""

    def fn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion | str:
        if messages[-1]["role"] == "tool":
            return answer
        return Completion(tool_calls=calls)

    return FunctionModel(fn)


# --------------------------------------------------------------------------- item 7: RunResult.ok


async def test_ok_is_true_for_an_answer_and_false_when_the_fallback_answered() -> None:
    echo = ToolCall("c1", "s__echo", {"text": "北京"})
    async with open_runtime(config(server("s")), models={"scripted": calls_then_answers(echo)}) as runtime:
        answered = await runtime.run("a", "北京今天适合穿什么?")
    assert (answered.outcome, answered.ok, answered.text) == (Outcome.ANSWERED, True, "done")

    def always_calls(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion | str:
        if "FALLBACK" in messages[0]["content"]:
            return "a summary of what the tools said"
        return Completion(tool_calls=[echo])

    models = {"scripted": FunctionModel(always_calls)}
    async with open_runtime(config(server("s"), max_turn=1), models=models) as runtime:
        out_of_turns = await runtime.run("a", "北京今天适合穿什么?")
    assert out_of_turns.outcome is Outcome.FALLBACK
    assert out_of_turns.text  # .text alone cannot tell success ...
    assert not out_of_turns.ok  # ... .ok can


async def test_ok_is_false_for_errors_and_cancelled_runs() -> None:
    async def never(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        await trio.sleep_forever()
        return ""

    models = {"scripted": FunctionModel(never)}
    async with open_runtime(config(server("s"), fallback=False), models=models) as runtime:
        async with runtime.open_run("a", "hi") as events:
            async for event in events:
                if event["type"] == "STEP_STARTED":
                    events.cancel()
        assert events.result is not None
        assert events.result.outcome is Outcome.CANCELLED
        assert not events.result.ok


# --------------------------------------------------------------------------- item 8: readiness


async def test_wait_ready_names_each_server_that_is_not_ready_and_why(autojump_clock: trio.abc.Clock) -> None:
    restart = RestartPolicy(max_restarts=1000, backoff_initial=1, backoff_max=1)
    specs = (server("ok"), server("down1", restart=restart), server("down2", restart=restart))
    async with open_runtime(config(*specs), models={"scripted": FunctionModel(lambda m, t: "x")},
                            connect=flaky_connect) as runtime:  # fmt: skip
        with pytest.raises(NotReady) as caught:
            await runtime.wait_ready(timeout=10)
        assert trio.current_time() == pytest.approx(10, abs=0.5)
        assert set(caught.value.servers) == {"down1", "down2"}
        assert "down1 refuses connections" in caught.value.servers["down1"]
        assert caught.value.servers["down1"].startswith(("restarting: ", "starting: "))
        assert "down2" in str(caught.value)


async def test_wait_ready_returns_once_every_server_is_ready(autojump_clock: trio.abc.Clock) -> None:
    attempts: dict[str, int] = {}

    @asynccontextmanager
    async def second_time_lucky(spec: ServerSpec, *, link: Link, **kwargs: Any) -> AsyncIterator[mcp.Client]:
        attempts[spec.id] = attempts.get(spec.id, 0) + 1
        if attempts[spec.id] == 1:
            raise ConnectionRefusedError("not yet")
        async with open_client(spec, link=link, **kwargs) as client:
            yield client

    async with open_runtime(config(server("s")), models={"scripted": FunctionModel(lambda m, t: "x")},
                            connect=second_time_lucky) as runtime:  # fmt: skip
        assert runtime.servers["s"].state is not ServerState.READY
        await runtime.wait_ready(timeout=30)
        assert runtime.servers["s"].state is ServerState.READY


async def test_wait_ready_fails_at_once_for_a_server_that_gave_up(autojump_clock: trio.abc.Clock) -> None:
    gives_up = server("down", restart=RestartPolicy(max_restarts=1, backoff_initial=1, backoff_max=1))
    async with open_runtime(config(gives_up), models={"scripted": FunctionModel(lambda m, t: "x")},
                            connect=flaky_connect) as runtime:  # fmt: skip
        with pytest.raises(NotReady) as caught:
            await runtime.wait_ready()  # no timeout: a server that gave up still ends the wait
        assert caught.value.servers["down"].startswith("down: ")


async def test_ready_timeout_makes_open_runtime_wait_or_fail(autojump_clock: trio.abc.Clock) -> None:
    with pytest.raises(NotReady, match="down1"):
        async with open_runtime(config(server("ok"), server("down1")), connect=flaky_connect, ready_timeout=5,
                                models={"scripted": FunctionModel(lambda m, t: "x")}):  # fmt: skip
            pytest.fail("the block must not run")
    async with open_runtime(config(server("ok")), ready_timeout=5,
                            models={"scripted": FunctionModel(lambda m, t: "x")}) as runtime:  # fmt: skip
        assert runtime.servers["ok"].state is ServerState.READY


async def test_a_down_servers_tools_are_server_unavailable_not_unknown(autojump_clock: trio.abc.Clock) -> None:
    """The model calls a tool of a server that is down (it knew it from an earlier run, or guessed)."""
    model = calls_then_answers(ToolCall("c1", "down1__echo", {"text": "x"}), ToolCall("c2", "ok__nope", {}))
    async with open_runtime(config(server("ok"), server("down1")), connect=flaky_connect,
                            models={"scripted": model}) as runtime:  # fmt: skip
        result = await runtime.run("a", "hi")
        offered = await tool_names(runtime.servers["ok"])
    down, unknown = result.tool_results[:2]  # the retry block asks again about the unknown tool
    assert (down.kind, down.server) == (ErrorKind.SERVER_UNAVAILABLE, "down1")
    assert "server 'down1' is restarting" in (down.error or "")
    assert unknown.kind is ErrorKind.UNKNOWN_TOOL  # a wrong name of a server that is up stays unknown_tool
    statuses = [e["value"] for e in result.events if e["type"] == "CUSTOM" and e["name"] == "server_status"]
    assert statuses[0]["server"] == "down1"
    assert [t["function"]["name"] for t in model.calls[0].tools] == offered


async def tool_names(handle: ServerHandle) -> list[str]:
    return [f"{handle.id}__{tool.name}" for tool in await handle.list_tools()]


def test_server_state_is_exported() -> None:
    assert yao_actors.ServerState is ServerState
    assert {"ServerState", "NotReady", "FunctionModel", "Completion", "ToolCall", "parse_config"} <= set(
        yao_actors.__all__
    )


# --------------------------------------------------------------------------- disabled servers


async def test_a_disabled_server_is_not_started_and_its_tools_are_not_offered() -> None:
    started: list[str] = []

    recording = noting_connector(lambda spec, options: started.append(spec.id))

    model = calls_then_answers(ToolCall("c1", "off__echo", {"text": "x"}))
    cfg = config(server("on"), server("off", disabled=True))
    async with open_runtime(cfg, models={"scripted": model}, connect=recording, ready_timeout=30) as runtime:
        assert list(runtime.servers) == ["on"]
        result = await runtime.run("a", "hi")
        offered = await tool_names(runtime.servers["on"])
    assert started == ["on"]
    assert [t["function"]["name"] for t in model.calls[0].tools] == offered
    assert result.tool_results[0].kind is ErrorKind.SERVER_UNAVAILABLE


# --------------------------------------------------------------------------- items 5 and 6


async def test_a_model_only_open_runtime_knows_needs_no_placeholder_and_a_prompt_string_is_one_prompt() -> None:
    model = FunctionModel(lambda messages, tools: "ok")
    async with open_runtime(config(server("s")), models={"scripted": model}) as runtime:
        result = await runtime.run("a", "hi")
    assert result.ok
    assert [m["content"] for m in model.calls[0].messages if m["role"] == "system"] == ["Be brief"]
    with pytest.raises(ConfigError, match=r"assistants\.a\.model: unknown model 'scripted'"):
        async with open_runtime(config(server("s"))):
            pytest.fail("the block must not run")


# --------------------------------------------------------------------------- item 9: threads


async def test_threads_can_be_listed_read_and_forgotten() -> None:
    model = FunctionModel(lambda messages, tools: f"answer {len(messages)}")
    async with open_runtime(config(server("s")), models={"scripted": model}) as runtime:
        first = await runtime.run("a", "one", thread_id="t1")
        await runtime.run("a", "two", thread_id="t1")
        await runtime.run("a", "other", thread_id="t2")
        assert {t.thread_id for t in await runtime.threads()} == {"t1", "t2"}
        history = await runtime.history("t1")
        assert [m["content"] for m in history.messages] == ["one", first.text, "two", "answer 4"]
        assert await runtime.forget("t1")
        assert [t.thread_id for t in await runtime.threads()] == ["t2"]
        assert (await runtime.history("t1")).messages == ()
        assert not await runtime.forget("never-existed")
        again = await runtime.run("a", "fresh", thread_id="t1")
        assert again.text == "answer 2"  # the system prompt and the new input only


# --------------------------------------------------------------------------- item 10: the model contract


def test_tool_call_arguments_may_be_a_dict_and_finish_reason_follows_the_calls() -> None:
    call = ToolCall("c1", "weather__get", {"city": "北京"})
    assert call.arguments == '{"city":"北京"}'
    assert ToolCall("c2", "x", '{"a": 1}').arguments == '{"a": 1}'
    assert Completion(tool_calls=[call]).finish_reason == "tool_calls"
    assert Completion(tool_calls=[call]).tool_calls == (call,)
    assert Completion(text="hi").finish_reason == "stop"
    assert Completion(tool_calls=[call], finish_reason="length").finish_reason == "length"


async def test_a_scripted_model_may_be_sync_or_async() -> None:
    async def async_fn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion | str:
        if messages[-1]["role"] == "tool":
            return f"tool said {messages[-1]['content']}"
        return Completion(tool_calls=[ToolCall("c1", "s__add", {"a": 1, "b": 2})])

    async with open_runtime(config(server("s")), models={"scripted": FunctionModel(async_fn)}) as runtime:
        result = await runtime.run("a", "1+2?")
    assert result.ok
    assert result.text == 'tool said {"sum":3}'


# --------------------------------------------------------------------------- item 11: progress callbacks


async def test_progress_may_be_a_plain_function() -> None:
    seen: list[tuple[float, float | None, str | None]] = []
    async with open_runtime(config(server("s"))  , models={"scripted": FunctionModel(lambda m, t: "x")}) as runtime:  # fmt: skip
        outcome = await runtime.servers["s"].call_tool(
            "progress", {"steps": 3}, progress=lambda value, total, message: seen.append((value, total, message))
        )
    assert outcome.ok, outcome
    assert seen == [(i, 3, f"step {i} of 3") for i in (1, 2, 3)]
