"""Issue 11: the run behaves as the seed does where the audit found it did not (history window, prompts and
options, the fallback assistant, hooks, the hard fallback, call ids)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio

from tests.dispatch_support import serving
from tests.test_conversation import (
    USAGE,
    assistant,
    call,
    check_stream,
    open_weather_manager,
    run_once,
    scripted,
    text_reply,
    tools_reply,
    types,
    weather_server,
)
from yao_actors.config import AssistantSpec, Hooks, ModelSpec
from yao_actors.conversation import open_conversations
from yao_actors.conversation.loop.hooks import HookContext
from yao_actors.errors import ModelHTTPError
from yao_actors.events import Outcome
from yao_actors.models.base import Completion, Message, ToolCall
from yao_actors.models.openai import OpenAIModel
from yao_actors.testing import FunctionModel, Reply, open_fake_openai

# --------------------------------------------------------------------------- 1. the history window


def echo_model() -> FunctionModel:
    return FunctionModel(lambda messages, tools: "ok", name="echo")


async def test_a_long_thread_sends_the_last_20_messages_and_keeps_them_all() -> None:
    model = echo_model()
    async with open_weather_manager(model) as manager:
        for turn in range(30):
            await manager.run("a", f"question {turn}", thread_id="t")
        history = manager.history("t")
    assert len(history) == 60
    last = model.calls[-1].messages
    assert last[0] == {"role": "system", "content": "P"}
    conversation = last[1:]
    assert len(conversation) == 21  # 20 of history, then the input
    assert conversation[0] == {"role": "user", "content": "question 19"}
    assert conversation[-1] == {"role": "user", "content": "question 29"}


@pytest.mark.parametrize(("limit", "sent"), [(0, 1), (None, 11), (4, 5)])
async def test_history_max_messages_zero_none_and_a_number(limit: int | None, sent: int) -> None:
    model = echo_model()
    async with open_weather_manager(model, history_max_messages=limit) as manager:
        for turn in range(6):
            await manager.run("a", f"q{turn}", thread_id="t")
    assert len(model.calls[-1].messages) == 1 + sent


async def test_the_window_drops_whole_tool_turns_and_the_fallback_brief_uses_it() -> None:
    def fail(messages: list[dict[str, Any]]) -> Completion:
        raise ModelHTTPError(500, "down")

    model = scripted(
        tools_reply(call("w__get", {"city": "Beijing"})),
        text_reply("25 degrees"),
        tools_reply(call("w__get", {"city": "Paris"})),
        fail,
        text_reply("synthesised"),
    )
    async with open_weather_manager(model, history_max_messages=3) as manager:
        await manager.run("a", "weather in Beijing?", thread_id="t")
        assert len(manager.history("t")) == 4  # user, assistant(tool_calls), tool, assistant
        result = await manager.run("a", "and in Paris?", thread_id="t")
    # Window 3 of 4: the tool turn (2 messages) and the answer fit, the old question does not.
    sent = model.calls[2].messages
    assert [m["role"] for m in sent] == ["system", "assistant", "tool", "assistant", "user"]
    brief = model.calls[-1].messages[-1]["content"]
    assert "weather in Beijing?" not in brief
    assert "**Assistant**: 25 degrees\n\n**User**: and in Paris?" in brief
    assert result.outcome is Outcome.FALLBACK


# --------------------------------------------------------------------------- 2. global prompts, options, static tools


async def test_global_prompts_come_before_the_assistants_own() -> None:
    model = echo_model()
    spec = AssistantSpec(id="a", model="m", prompt=("P",))
    async with open_conversations({"a": spec}, {}, {"m": model}, prompts=("G1", "G2")) as manager:
        await manager.run("a", "Q")
    assert [m["content"] for m in model.calls[0].messages] == ["G1", "G2", "P", "Q"]


STATIC_TOOL = {"type": "function", "function": {"name": "local", "description": "", "parameters": {}}}


async def test_static_tools_of_the_options_are_offered_before_the_mcp_tools() -> None:
    plain, with_static = echo_model(), echo_model()
    await run_once(plain)
    await run_once(with_static, options={"tools": [STATIC_TOOL], "temperature": 0})
    assert plain.calls[0].tools
    assert with_static.calls[0].tools == (STATIC_TOOL, *plain.calls[0].tools)


async def test_options_are_merged_over_the_models_params_in_the_real_request() -> None:
    model_tool = {"type": "function", "function": {"name": "from_params", "parameters": {"type": "object"}}}
    params = {"temperature": 1.0, "top_p": 0.5, "tools": [model_tool]}
    options = {"temperature": 0.2, "tool_choice": "auto", "tools": [STATIC_TOOL]}
    with trio.fail_after(60):
        async with open_fake_openai([Reply(text="ok")]) as fake:
            spec = ModelSpec(id="m", provider="openai", base_url=fake.base_url, model="g", api_key_env=None)
            model = OpenAIModel(attrs.evolve(spec, params=params))
            result = await run_once(model, options=options)
    assert result.text == "ok"
    (request,) = fake.requests
    assert (request.body["temperature"], request.body["top_p"], request.body["tool_choice"]) == (0.2, 0.5, "auto")
    names = [tool["function"]["name"] for tool in request.body["tools"]]
    assert names[:2] == ["from_params", "local"]
    assert "w__get" in names[2:]


# --------------------------------------------------------------------------- 3. the fallback assistant


async def test_fallback_names_a_configured_assistant_that_gets_the_brief() -> None:
    main = scripted(*(tools_reply(call("w__get", {"city": "Beijing"}, f"c{i}")) for i in range(3)))
    synthesiser = FunctionModel(lambda messages, tools: "synthesised", name="synth")
    writer = AssistantSpec(id="writer", model="s", prompt=("You write briefly.",))
    spec = assistant(max_turn=2, fallback="writer")
    assistants = {"a": spec, "writer": writer}
    async with (
        serving(weather_server()) as servers,
        open_conversations(assistants, servers, {"m": main, "s": synthesiser}) as manager,
    ):
        result = await manager.run("a", "Q")
    check_stream(result.events)
    assert result.outcome is Outcome.FALLBACK
    assert result.text == "synthesised"
    (request,) = synthesiser.calls
    assert request.messages[0] == {"role": "system", "content": "You write briefly."}
    assert request.messages[1]["role"] == "user"
    assert request.messages[1]["content"].startswith("## Assistant Context\n\nP\n\n")
    started = [e for e in result.events if e["type"] == "SUBAGENT_STARTED"]
    assert [e["name"] for e in started] == ["writer"]


async def test_fallback_false_ends_a_run_out_of_turns_with_run_error_max_turns() -> None:
    model = scripted(*(tools_reply(call("w__get", {"city": "Beijing"}, f"c{i}")) for i in range(3)))
    result = await run_once(model, max_turn=2, fallback=False)
    check_stream(result.events)
    assert result.outcome is Outcome.ERROR
    assert result.code == "max_turns"
    assert result.error == "tool loop reached max turns (2)"
    assert result.events[-1]["type"] == "RUN_ERROR"
    assert result.events[-1]["code"] == "max_turns"
    assert "SUBAGENT_STARTED" not in types(result.events)


# --------------------------------------------------------------------------- 4. the next hook


PAYLOADS: list[dict[str, Any]] = []


def next_records(ctx: HookContext, payload: dict[str, Any]) -> None:
    PAYLOADS.append(payload)


@pytest.mark.parametrize(
    "replies",
    [
        pytest.param([text_reply("plain answer")], id="answer-without-tool-calls"),
        pytest.param(
            [tools_reply(call("w__get", {"town": "x"})), text_reply("plain answer")], id="text-answer-to-a-retry"
        ),
    ],
)
async def test_next_runs_after_every_completion_with_the_seeds_fields(replies: list[Completion]) -> None:
    PAYLOADS.clear()
    result = await run_once(scripted(*replies), hooks=Hooks(next="tests.test_seed_conformance:next_records"))
    check_stream(result.events)
    assert result.text == "plain answer"
    (payload,) = PAYLOADS
    assert set(payload) == {"messages", "completion", "tools", "tool_results", "error"}
    assert payload["messages"] == [{"role": "user", "content": "Q"}]
    assert payload["completion"].text == "plain answer"
    assert payload["tools"] == payload["tool_results"] == list(result.tool_results)
    assert payload["error"] == ""


# --------------------------------------------------------------------------- 5. the create hook


def create_rewrites(ctx: HookContext, messages: list[Message]) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": "rewritten"}],
        "mcp_servers": [{"server_id": "w", "tools": ["get"]}],
    }


def create_unknown_key(ctx: HookContext, messages: list[Message]) -> dict[str, Any]:
    return {"messages": [], "prompt_preset": "x"}


async def test_create_messages_replace_the_conversation_and_the_thread_keeps_the_real_input() -> None:
    model = echo_model()
    async with open_weather_manager(
        model, hooks=Hooks(create="tests.test_seed_conformance:create_rewrites")
    ) as manager:
        await manager.run("a", "first", thread_id="t")
        await manager.run("a", "second", thread_id="t")
        history = manager.history("t")
    assert [m["content"] for m in model.calls[0].messages] == ["P", "rewritten"]
    assert [m["content"] for m in model.calls[1].messages] == ["P", "rewritten"]
    assert [tool["function"]["name"] for tool in model.calls[0].tools] == ["w__get"]
    assert [m["content"] for m in history] == ["first", "ok", "second", "ok"]


async def test_an_unknown_key_from_the_create_hook_is_a_hook_error_naming_it() -> None:
    result = await run_once(echo_model(), hooks=Hooks(create="tests.test_seed_conformance:create_unknown_key"))
    check_stream(result.events)
    assert result.code == "hook_error"
    assert "'prompt_preset'" in (result.error or "")


# --------------------------------------------------------------------------- 6. the hard fallback


def bug(messages: list[dict[str, Any]]) -> Completion:
    raise ValueError("the fallback model broke")


async def test_a_fallback_model_raising_anything_still_finishes_with_the_last_text() -> None:
    model = scripted(
        tools_reply(call("w__get", {"city": "Beijing"}, "c0"), text="let me look"),
        tools_reply(call("w__get", {"city": "Rome"}, "c1")),
        bug,
    )
    result = await run_once(model, max_turn=1)
    check_stream(result.events)
    assert result.outcome is Outcome.DEGRADED
    assert result.text == "let me look"
    assert result.events[-1]["type"] == "RUN_FINISHED"
    assert "the fallback model broke" in result.events[-1]["result"]["note"]


async def test_without_any_text_the_hard_fallback_answers_with_the_tool_results() -> None:
    model = scripted(
        tools_reply(call("w__get", {"city": "Beijing"}, "c0")), tools_reply(call("w__get", {"city": "Rome"}, "c1")), bug
    )
    result = await run_once(model, max_turn=1)
    check_stream(result.events)
    assert result.outcome is Outcome.DEGRADED
    assert result.text.startswith("## Tool Results\n\n### w.get\n```json\n")
    assert '{"city":"Beijing","temp":25}' in result.text
    assert result.events[-1]["result"]["text"] == result.text


# --------------------------------------------------------------------------- 11. call ids


async def test_empty_and_duplicate_call_ids_get_unique_ids_everywhere() -> None:
    calls = (
        ToolCall(id="", name="w__get", arguments='{"city": "A"}'),
        ToolCall(id="same", name="w__get", arguments='{"city": "B"}'),
        ToolCall(id="same", name="w__get", arguments='{"city": "C"}'),
    )
    model = scripted(Completion(tool_calls=calls, finish_reason="tool_calls", usage=USAGE), text_reply("done"))
    async with open_weather_manager(model) as manager:
        result = await manager.run("a", "Q", thread_id="t")
        history = manager.history("t")
    check_stream(result.events)
    ids = [r.call_id for r in result.tool_results]
    assert ids[1] == "same"
    assert len(set(ids)) == 3
    assert ids[0].startswith("call_")
    assert ids[2].startswith("call_")
    for kind in ("TOOL_CALL_START", "TOOL_CALL_END", "TOOL_CALL_RESULT"):
        assert sorted(e["toolCallId"] for e in result.events if e["type"] == kind) == sorted(ids)
    assistant_message = history[1]
    assert [c["id"] for c in assistant_message["tool_calls"]] == ids
    assert [m["tool_call_id"] for m in history[2:5]] == ids
    assert [r.arguments for r in result.tool_results] == [c.arguments for c in calls]
    second_request = model.calls[1].messages
    assert [c["id"] for c in second_request[2]["tool_calls"]] == ids
