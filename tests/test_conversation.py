"""The conversation actor and the run with FunctionModel and in-memory servers."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.dispatch_support import Crash, ScriptedServer, scripted_server, serving, tool
from tests.support import check_stream, open_manager
from yao_actors.config import AssistantSpec, Hooks, RunTimeouts, ServerRef, max_turns, tool_loop_enabled
from yao_actors.conversation import ConversationManager, ConversationStatistics, RunResult
from yao_actors.conversation.loop.fallback import FALLBACK_ASSISTANT_ID, FALLBACK_PROMPT
from yao_actors.conversation.loop.hooks import HookContext
from yao_actors.conversation.loop.prompt import TOOL_RETRY_PROMPT
from yao_actors.errors import ErrorKind, ModelHTTPError, RunError
from yao_actors.events import EventDict, Outcome
from yao_actors.models.base import Completion, Message, Model, ToolCall, Usage
from yao_actors.testing import FunctionModel
from yao_actors.tools.results import ToolOutcome

CITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
USAGE = Usage(10, 5, 15)


def call(name: str, arguments: Any = None, call_id: str | None = None) -> ToolCall:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCall(id=call_id or f"call_{name}_{text}", name=name, arguments=text)


def tools_reply(*calls: ToolCall, text: str = "") -> Completion:
    return Completion(text=text, tool_calls=calls, finish_reason="tool_calls", usage=USAGE)


def text_reply(text: str) -> Completion:
    return Completion(text=text, usage=USAGE)


Reply = Completion | Callable[[list[dict[str, Any]]], Completion]


def scripted(*replies: Reply) -> FunctionModel:
    """A model answering with ``replies`` in order (a callable gets the messages)."""
    queue = list(replies)

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        assert queue, "the model was called more often than scripted"
        reply = queue.pop(0)
        return reply(messages) if callable(reply) else reply

    return FunctionModel(answer, name="scripted", chunk_size=4)


def weather_server() -> ScriptedServer:
    server = scripted_server("w")
    server.tools.append(tool("get", CITY_SCHEMA))

    async def get(arguments: dict[str, Any], progress: Any, n: int) -> ToolOutcome:
        return ToolOutcome(result={"city": arguments["city"], "temp": 25})

    server.scripts["get"] = get
    return server


def assistant(**options: Any) -> AssistantSpec:
    defaults: dict[str, Any] = {"id": "a", "model": "m", "prompt": ("P",), "servers": (ServerRef("w"),)}
    return AssistantSpec(**(defaults | options))


@asynccontextmanager
async def open_weather_manager(
    model: Model,
    *extra: AssistantSpec,
    server: ScriptedServer | None = None,
    limits: Mapping[str, int] | None = None,
    **options: Any,
) -> AsyncIterator[ConversationManager]:
    """Conversations of assistant ``a`` (``options`` change it) and ``extra`` over the weather server ``w``.

    ``limits`` go to :func:`~yao_actors.conversation.open_conversations` (``max_threads``, ``max_thread_bytes``, ...).
    """
    async with (
        serving(server or weather_server()) as servers,
        open_manager(servers, model, assistant(**options), *extra, **(limits or {})) as manager,
    ):
        yield manager


async def run_once(model: Model, question: str = "Q", **options: Any) -> RunResult:
    async with open_weather_manager(model, **options) as manager:
        return await manager.run("a", question)


def types(events: Sequence[EventDict]) -> list[str]:
    return [event["type"] for event in events]


def custom(events: Sequence[EventDict], name: str) -> list[Any]:
    return [event["value"] for event in events if event["type"] == "CUSTOM" and event["name"] == name]


# --------------------------------------------------------------------------- loop scenarios


async def test_loop_converging_in_turn_one() -> None:
    model = scripted(tools_reply(call("w__get", {"city": "Beijing"}), text="checking"), text_reply("25 degrees"))
    result = await run_once(model)
    check_stream(result.events)
    assert result.text == "25 degrees"
    assert result.outcome is Outcome.ANSWERED
    assert len(model.calls) == 2
    first, second = (c.messages for c in model.calls)
    assert first == ({"role": "system", "content": "P"}, {"role": "user", "content": "Q"})
    assert second[:2] == first
    assert second[2]["role"] == "assistant"
    assert second[2]["tool_calls"][0]["function"] == {"name": "w__get", "arguments": '{"city": "Beijing"}'}
    tool_id = second[2]["tool_calls"][0]["id"]
    assert second[3] == {"role": "tool", "tool_call_id": tool_id, "content": '{"city":"Beijing","temp":25}'}
    assert [r.tool for r in result.tool_results] == ["get"]
    assert result.usage == USAGE + USAGE
    assert result.events[-1]["usage"] == [{"inputTokens": 20, "outputTokens": 10, "totalTokens": 30}]
    assert len(custom(result.events, "usage")) == 2


async def test_stream_relays_deltas_and_results_in_protocol_order() -> None:
    model = scripted(tools_reply(call("w__get", {"city": "Beijing"}), text="let me see"), text_reply("sunny"))
    result = await run_once(model)
    kinds = types(result.events)
    assert kinds[:2] == ["RUN_STARTED", "STEP_STARTED"]
    assert kinds.index("TEXT_MESSAGE_START") < kinds.index("TOOL_CALL_START") < kinds.index("TOOL_CALL_ARGS")
    assert kinds.index("TOOL_CALL_END") < kinds.index("TOOL_CALL_RESULT")
    args = "".join(e["delta"] for e in result.events if e["type"] == "TOOL_CALL_ARGS")
    assert args == '{"city": "Beijing"}'
    assert len([e for e in result.events if e["type"] == "TOOL_CALL_ARGS"]) > 1  # streamed in pieces
    answer = "".join(e["delta"] for e in result.events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert answer == "let me seesunny"
    assert kinds.count("STEP_STARTED") == kinds.count("STEP_FINISHED") == 2
    assert kinds.count("TEXT_MESSAGE_START") == kinds.count("TEXT_MESSAGE_END") == 2
    assert result.events[-1]["result"]["outcome"] == "answered"


@pytest.mark.parametrize("chunk_size", [None, 4])
async def test_a_model_that_does_not_stream_gives_the_same_events(chunk_size: int | None) -> None:
    """The benchmarks' non-streaming FunctionModel: the run announces the text and calls itself, in the same order."""
    replies = [tools_reply(call("w__get", {"city": "Beijing"}), text="checking"), text_reply("25 degrees")]

    def answer(replies: list[Completion]) -> Callable[[list[dict[str, Any]], list[dict[str, Any]]], Completion]:
        return lambda messages, tools: replies.pop(0)

    streamed = await run_once(FunctionModel(answer(list(replies)), chunk_size=chunk_size))
    whole = await run_once(FunctionModel(answer(list(replies)), stream=False))

    def shape(event: EventDict) -> str:
        kept = {key: value for key, value in event.items() if key not in ("timestamp", "runId", "threadId")}
        if event["type"] == "TOOL_CALL_RESULT":
            kept["metadata"] = {**event["metadata"], "durationMs": None}
        return json.dumps(kept).replace(event["runId"], "<run>")  # message ids start with the run id

    check_stream(whole.events)
    if chunk_size is None:
        assert [shape(e) for e in whole.events] == [shape(e) for e in streamed.events]
    else:  # the streamed text and arguments arrive in pieces; joined, they are the same
        assert types(whole.events).count("TEXT_MESSAGE_CONTENT") == 2
    assert whole.text == streamed.text == "25 degrees"
    assert whole.tool_results[0].result == streamed.tool_results[0].result


async def test_retry_then_success() -> None:
    bad = call("w__get", {"town": "Beijing"}, "c1")
    good = call("w__get", {"city": "Beijing"}, "c2")
    model = scripted(tools_reply(bad), tools_reply(good), text_reply("done"))
    server = weather_server()
    async with open_weather_manager(model, server=server) as manager:
        result = await manager.run("a", "Q")
    check_stream(result.events)
    assert result.text == "done"
    retry_request = model.calls[1].messages
    assert retry_request[-1] == {"role": "system", "content": TOOL_RETRY_PROMPT}
    assert retry_request[-2]["role"] == "tool"
    assert retry_request[-2]["content"].startswith("Error: ")
    assert server.executions["get"] == 1  # the invalid call never reached the server
    assert [(r.call_id, r.kind) for r in result.tool_results] == [("c1", ErrorKind.INVALID_ARGUMENTS), ("c2", None)]
    assert custom(result.events, "tool_retry") == [{"attempt": 1, "toolCallIds": ["c1"]}]
    assert all(m["content"] != TOOL_RETRY_PROMPT for m in model.calls[2].messages)


async def test_three_retryable_failures_stop_retrying_and_let_the_model_answer() -> None:
    bad = tools_reply(call("w__get", {"town": "x"}))
    model = scripted(bad, bad, bad, text_reply("I could not get the weather"))
    result = await run_once(model)
    check_stream(result.events)
    assert len(result.tool_results) == 3
    assert all(r.kind is ErrorKind.INVALID_ARGUMENTS for r in result.tool_results)
    assert [v["attempt"] for v in custom(result.events, "tool_retry")] == [1, 2]
    retry_prompts = [c for c in model.calls if c.messages[-1].get("content") == TOOL_RETRY_PROMPT]
    assert len(retry_prompts) == 2
    assert result.text == "I could not get the weather"
    assert result.outcome is Outcome.ANSWERED


async def test_plain_text_retry_answer_is_accepted() -> None:
    model = scripted(tools_reply(call("w__nope", {})), text_reply("no such tool, sorry"))
    result = await run_once(model)
    check_stream(result.events)
    assert result.outcome is Outcome.ANSWERED
    assert result.text == "no such tool, sorry"
    assert [r.kind for r in result.tool_results] == [ErrorKind.UNKNOWN_TOOL]


async def test_non_retryable_failure_goes_to_the_model_without_retry() -> None:
    server = weather_server()

    async def down(arguments: dict[str, Any], progress: Any, n: int) -> ToolOutcome:
        raise Crash("the server process exited", exit_code=1)

    server.scripts["get"] = down
    model = scripted(tools_reply(call("w__get", {"city": "Beijing"})), text_reply("weather is unavailable"))
    async with open_weather_manager(model, server=server) as manager:
        result = await manager.run("a", "Q")
    check_stream(result.events)
    assert [r.kind for r in result.tool_results] == [ErrorKind.SERVER_UNAVAILABLE]
    assert custom(result.events, "tool_retry") == []
    error = "Error: server 'w' unavailable: the server process exited (exit code 1)"
    assert model.calls[1].messages[-1]["content"] == error
    assert custom(result.events, "server_status")[0]["server"] == "w"
    assert result.text == "weather is unavailable"


async def test_max_turn_two_falls_back_with_all_results_of_all_turns() -> None:
    def always_tools(messages: list[dict[str, Any]]) -> Completion:
        turn = sum(1 for m in messages if m.get("role") == "tool")
        return tools_reply(call("w__get", {"city": f"C{turn}"}, f"c{turn}"), text=f"turn {turn}")

    model = scripted(always_tools, always_tools, always_tools, text_reply("synthesised"))
    server = weather_server()
    async with open_weather_manager(model, server=server, max_turn=2) as manager:
        result = await manager.run("a", "Q")
    check_stream(result.events)
    assert server.executions["get"] == 3  # 1 + 2 turns, the last turn's calls executed too
    assert result.outcome is Outcome.FALLBACK
    assert result.text == "synthesised"
    assert result.note == "tool loop reached max turns (2)"
    fallback_request = model.calls[-1]
    assert fallback_request.tools == ()
    assert fallback_request.messages[0] == {"role": "system", "content": FALLBACK_PROMPT}
    brief = fallback_request.messages[1]["content"]
    assert brief.startswith("## Assistant Context\n\nP\n\n## Conversation\n\n**User**: Q\n\n## Tool Results\n\n")
    for city in ("C0", "C1", "C2"):
        assert f'### w.get\n```json\n{{"city":"{city}","temp":25}}\n```' in brief
    kinds = types(result.events)
    started = kinds.index("SUBAGENT_STARTED")
    assert result.events[started]["name"] == FALLBACK_ASSISTANT_ID
    assert kinds.index("SUBAGENT_FINISHED") > started
    attributed = [e for e in result.events[started + 1 :] if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert attributed
    assert all(e["subagentRunId"] == result.events[started]["subagentRunId"] for e in attributed)
    assert result.usage == Usage(40, 20, 60)  # 3 tool turns and the fallback
    steps = [e["stepName"] for e in result.events if e["type"] == "STEP_STARTED"]
    assert steps == ["turn 1", "turn 2", "turn 3", "fallback"]  # one numbering from the first model call on


async def test_tool_loop_false_gives_the_standard_response() -> None:
    model = scripted(tools_reply(call("w__get", {"city": "Beijing"}), text="first"))
    result = await run_once(model, tool_loop=False)
    check_stream(result.events)
    assert len(model.calls) == 1
    assert result.text == "first"
    assert [r.ok for r in result.tool_results] == [True]


@pytest.mark.parametrize(
    ("raw_loop", "raw_turns", "model_calls", "outcome"),
    [
        ("false", "3", 7, Outcome.FALLBACK),  # the string "false" keeps the loop; "3" means 5 turns
        (False, 2, 1, Outcome.ANSWERED),
        (True, 2.7, 4, Outcome.FALLBACK),  # first call, 2 turns, the fallback
        (True, 0.5, 2, Outcome.FALLBACK),  # zero turns: straight to the fallback
    ],
)
async def test_seed_rules_for_tool_loop_and_max_turn(
    raw_loop: Any, raw_turns: Any, model_calls: int, outcome: Outcome
) -> None:
    def always_tools(messages: list[dict[str, Any]]) -> Completion:
        if messages[0]["content"] == FALLBACK_PROMPT:
            return text_reply("fallback")
        return tools_reply(call("w__get", {"city": "X"}, f"c{len(messages)}"))

    model = FunctionModel(lambda messages, tools: always_tools(messages))
    result = await run_once(model, tool_loop=tool_loop_enabled(raw_loop), max_turn=max_turns(raw_turns))
    check_stream(result.events)
    assert len(model.calls) == model_calls
    assert result.outcome is outcome


async def test_model_failure_in_first_call_is_a_run_error() -> None:
    def fail(messages: list[dict[str, Any]]) -> Completion:
        raise ModelHTTPError(400, "bad request", url="http://model")

    result = await run_once(scripted(fail))
    check_stream(result.events)
    assert result.outcome is Outcome.ERROR
    assert result.code == "model_error"
    assert result.events[-1]["type"] == "RUN_ERROR"
    assert result.events[-1]["code"] == "model_error"


async def test_model_failure_in_the_loop_falls_back() -> None:
    def fail(messages: list[dict[str, Any]]) -> Completion:
        raise ModelHTTPError(500, "overloaded")

    model = scripted(tools_reply(call("w__get", {"city": "Beijing"})), fail, text_reply("it is 25"))
    result = await run_once(model)
    check_stream(result.events)
    assert result.outcome is Outcome.FALLBACK
    assert result.note is not None
    assert "overloaded" in result.note
    assert result.text == "it is 25"


async def test_fallback_failure_finishes_with_what_it_has() -> None:
    def fail(messages: list[dict[str, Any]]) -> Completion:
        raise ModelHTTPError(500, "still overloaded")

    model = scripted(tools_reply(call("w__get", {"city": "Beijing"}), text="looking"), fail, fail)
    result = await run_once(model)
    check_stream(result.events)
    assert result.outcome is Outcome.DEGRADED
    assert result.text == "looking"
    assert [r.ok for r in result.tool_results] == [True]
    finished = result.events[-1]
    assert finished["type"] == "RUN_FINISHED"
    assert finished["result"]["outcome"] == "degraded"
    assert "fallback assistant failed too" in finished["result"]["note"]
    assert "SUBAGENT_ERROR" in types(result.events)


async def test_each_tool_message_has_the_content_its_result_event_carried() -> None:
    # One turn of calls with different results (one failing before its server, one failing on it), then another
    # turn: each call's tool message and its TOOL_CALL_RESULT event have the same content, by call id.
    model = scripted(
        tools_reply(
            call("w__get", {"city": "Beijing"}, "b"),
            call("w__nothing", {}, "u"),
            call("w__get", {"city": "Shanghai"}, "s"),
            call("w__fail", {"message": "北京 is closed"}, "f"),
        ),
        tools_reply(call("w__get", {"city": "Shanghai"}, "s2")),
        text_reply("done"),
    )
    result = await run_once(model)
    check_stream(result.events)
    sent = {e["toolCallId"]: e["content"] for e in result.events if e["type"] == "TOOL_CALL_RESULT"}
    last = model.calls[-1].messages
    kept = {m["tool_call_id"]: m["content"] for m in last if m["role"] == "tool"}
    assert kept == sent
    assert json.loads(kept["b"]) == {"city": "Beijing", "temp": 25}
    assert json.loads(kept["s"]) == json.loads(kept["s2"]) == {"city": "Shanghai", "temp": 25}
    assert kept["u"].startswith("Error: unknown tool")
    assert kept["f"].startswith("Error: ")
    assert "北京 is closed" in kept["f"]
    assert list(kept) == ["b", "u", "s", "f", "s2"]


async def test_model_deadline_is_a_model_failure(autojump_clock: trio.testing.MockClock) -> None:
    async def slow(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        await trio.sleep(1000)
        raise AssertionError("unreachable")

    result = await run_once(FunctionModel(slow), timeouts=RunTimeouts(run=5000, model=10, turn=10))
    check_stream(result.events)
    assert result.code == "model_error"
    assert "within 10 s" in (result.error or "")


# --------------------------------------------------------------------------- hooks


async def create_only(ctx: HookContext, messages: list[Message]) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "added by hook"}]}


def next_data(ctx: HookContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {"data": {"results": len(payload["tool_results"]), "text": payload["completion"].text}}


def next_none(ctx: HookContext, payload: dict[str, Any]) -> None:
    return None


def next_delegate(ctx: HookContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {"delegate": "helper"}


async def test_hook_without_next_still_loops() -> None:
    model = scripted(tools_reply(call("w__get", {"city": "Beijing"})), text_reply("looped"))
    result = await run_once(model, hooks=Hooks(create="tests.test_conversation:create_only"))
    assert result.text == "looped"
    assert len(model.calls) == 2
    assert model.calls[0].messages[-1] == {"role": "user", "content": "added by hook"}


@pytest.mark.parametrize(
    ("hook", "outcome", "data"),
    [("next_data", Outcome.DATA, {"results": 1, "text": "t"}), ("next_none", Outcome.ANSWERED, None)],
)
async def test_next_hook_replaces_the_loop(hook: str, outcome: Outcome, data: Any) -> None:
    model = scripted(tools_reply(call("w__get", {"city": "Beijing"}), text="t"))
    result = await run_once(model, hooks=Hooks(next=f"tests.test_conversation:{hook}"))
    check_stream(result.events)
    assert len(model.calls) == 1
    assert result.outcome is outcome
    assert result.data == data


async def test_next_hook_delegates_to_another_assistant() -> None:
    model = scripted(tools_reply(call("w__get", {"city": "Beijing"})), text_reply("helper answer"))
    helper = AssistantSpec(id="helper", model="m", prompt=("H",))
    async with open_weather_manager(
        model, helper, hooks=Hooks(next="tests.test_conversation:next_delegate")
    ) as manager:
        result = await manager.run("a", "Q")
    check_stream(result.events)
    assert result.text == "helper answer"
    assert model.calls[1].messages[0] == {"role": "system", "content": "H"}
    assert types(result.events).count("SUBAGENT_STARTED") == 1


async def test_bad_hook_reference_is_a_run_error_naming_it() -> None:
    result = await run_once(scripted(), hooks=Hooks(create="tests.test_conversation:missing"))
    check_stream(result.events)
    assert result.code == "hook_error"
    assert "tests.test_conversation:missing" in (result.error or "")


async def test_unknown_assistant_is_refused_before_any_event() -> None:
    async with open_weather_manager(scripted()) as manager:
        with pytest.raises(RunError) as caught:
            await manager.run("nobody", "Q")
    assert caught.value.code == "unknown_assistant"


# --------------------------------------------------------------------------- threads, cancellation, deadlines


async def test_history_is_kept_and_runs_on_a_thread_wait_their_turn() -> None:
    order: list[str] = []
    gate = trio.Event()

    async def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        question = messages[-1]["content"]
        order.append(f"start {question}")
        if question == "first":
            await gate.wait()
        order.append(f"end {question}")
        return text_reply(f"answer to {question}")

    model = FunctionModel(answer)
    with trio.fail_after(10):
        async with open_weather_manager(model) as manager:
            results: dict[str, RunResult] = {}

            async def ask(question: str) -> None:
                results[question] = await manager.run("a", question, thread_id="t1")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask, "first")
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(ask, "second")
                await trio.testing.wait_all_tasks_blocked()
                assert order == ["start first"]
                gate.set()
            history = manager.history("t1")
    assert order == ["start first", "end first", "start second", "end second"]
    assert [m["content"] for m in history] == ["first", "answer to first", "second", "answer to second"]
    assert model.calls[1].messages[1:] == (
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "answer to first"},
        {"role": "user", "content": "second"},
    )


async def test_other_threads_run_concurrently() -> None:
    both_in = trio.Event()
    inside = 0

    async def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        nonlocal inside
        inside += 1
        if inside == 2:
            both_in.set()
        await both_in.wait()
        return text_reply("ok")

    with trio.fail_after(10):
        async with open_weather_manager(FunctionModel(answer)) as manager, trio.open_nursery() as nursery:
            for thread in ("x", "y"):
                nursery.start_soon(functools.partial(manager.run, "a", "Q", thread_id=thread))
    assert both_in.is_set()


def slow_batch_model(seconds: float) -> FunctionModel:
    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        if messages[-1]["role"] == "user" and messages[-1]["content"] == "slow":
            return tools_reply(
                call("w__echo", {"x": 1}, "fast"), call("w__sleep", {"seconds": seconds}, "slow"), text="working"
            )
        return text_reply(f"seen {len(messages)} messages")

    return FunctionModel(answer)


async def test_tool_results_stream_as_each_call_finishes(autojump_clock: trio.testing.MockClock) -> None:
    server = weather_server()
    async with (
        open_weather_manager(slow_batch_model(30), server=server) as manager,
        manager.open_run("a", "slow") as stream,
    ):
        async for event in stream:
            if event["type"] == "TOOL_CALL_RESULT" and event["toolCallId"] == "fast":
                assert server.in_flight == 1  # the slow call is still running
                break
        else:
            raise AssertionError("no result for the fast call")
        rest = [event async for event in stream]
    assert rest[-1]["type"] == "RUN_FINISHED"


async def test_cancel_mid_batch_records_cancelled_results_and_next_run_works(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = weather_server()
    model = slow_batch_model(1000)
    async with open_weather_manager(model, server=server) as manager:
        async with manager.open_run("a", "slow", thread_id="t") as stream:
            events = []
            async for event in stream:
                events.append(event)
                if event["type"] == "TOOL_CALL_RESULT":
                    stream.cancel()
        check_stream(events)
        assert events[-1]["outcome"] == {"type": "cancelled"}
        await trio.testing.wait_all_tasks_blocked()  # the server hears of the cancellation
        assert server.cancelled == ["sleep"]
        results = {e["toolCallId"]: e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"}
        assert results["slow"] == "Error: the run was cancelled before the call finished"
        assert stream.result is not None
        assert [r.kind for r in stream.result.tool_results] == [None, ErrorKind.CANCELLED]
        history = manager.history("t")
        assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool"]
        assert [m["tool_call_id"] for m in history[2:]] == ["fast", "slow"]

        after = await manager.run("a", "next", thread_id="t")
    assert after.text == "seen 6 messages"
    sent = model.calls[-1].messages
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "user"]


async def test_leaving_the_block_early_cancels_the_run(autojump_clock: trio.testing.MockClock) -> None:
    server = weather_server()
    async with open_weather_manager(slow_batch_model(1000), server=server) as manager:
        async with manager.open_run("a", "slow", thread_id="t") as stream:
            async for event in stream:
                if event["type"] == "TOOL_CALL_START":
                    break
        assert stream.result is not None
        assert stream.result.outcome is Outcome.CANCELLED
        # The run may have gone on into its tool batch (it runs ahead of its reader by up to EVENT_BUFFER
        # events): then its calls are answered, the slow one cancelled; the answer never came.
        history = manager.history("t")
        assert history[0] == {"role": "user", "content": "slow"}
        assert [m["role"] for m in history] in (["user"], ["user", "assistant", "tool", "tool"])
        assert history[-1].get("content") != "seen 2 messages"
        results = {r.call_id: r.kind for r in stream.result.tool_results}
        assert results in (
            {},
            {"fast": None, "slow": ErrorKind.CANCELLED},
            {"fast": ErrorKind.CANCELLED, "slow": ErrorKind.CANCELLED},
        )


async def test_run_deadline_ends_with_run_error_and_cancelled_results(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = weather_server()
    timeouts = RunTimeouts(run=20, model=10, turn=500)
    result = await run_once(slow_batch_model(1000), "slow", server=server, timeouts=timeouts)
    check_stream(result.events)
    assert result.code == "run_timeout"
    assert [r.kind for r in result.tool_results] == [None, ErrorKind.CANCELLED]


async def test_turn_deadline_turns_slow_calls_into_timeouts(autojump_clock: trio.testing.MockClock) -> None:
    timeouts = RunTimeouts(run=5000, model=10, turn=5)
    result = await run_once(slow_batch_model(1000), "slow", timeouts=timeouts)
    check_stream(result.events)
    assert result.outcome is Outcome.ANSWERED
    assert [r.kind for r in result.tool_results] == [None, ErrorKind.TIMEOUT]


async def test_progress_and_sequential_retry_become_custom_events() -> None:
    server = scripted_server("w")
    model = scripted(
        tools_reply(call("w__progress", {"steps": 2}, "p"), call("w__flaky", {}, "f1"), call("w__flaky", {}, "f2")),
        text_reply("ok"),
    )
    result = await run_once(model, server=server)
    check_stream(result.events)
    progress = custom(result.events, "tool_progress")
    assert [(p["toolCallId"], p["progress"], p["total"]) for p in progress] == [("p", 1.0, 2.0), ("p", 2.0, 2.0)]
    [retried] = custom(result.events, "sequential_retry")  # flaky fails on its first execution only
    assert retried["toolCallIds"] in (["f1"], ["f2"])
    assert [r.ok for r in result.tool_results] == [True, True, True]


# --------------------------------------------------------------------------- properties


CALL_KINDS = st.sampled_from(["ok", "bad_args", "unknown", "tool_error", "slow"])


def make_call(kind: str, index: int) -> ToolCall:
    cid = f"c{index}"
    return {
        "ok": call("w__echo", {"i": index}, cid),
        "bad_args": call("w__get", "{not json", cid),
        "unknown": call("w__nothing", {}, cid),
        "tool_error": call("w__fail", {"message": "bad input"}, cid),
        "slow": call("w__sleep", {"seconds": 50}, cid),
    }[kind]


STEPS = st.one_of(
    st.builds(lambda: "text"),
    st.builds(lambda: "error"),
    st.lists(CALL_KINDS, min_size=1, max_size=3),
)


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(STEPS, min_size=1, max_size=5),
    max_turn=st.integers(0, 3),
    cancel_at=st.one_of(st.none(), st.integers(1, 40)),
    fallback_fails=st.booleans(),
)
def test_any_script_gives_a_valid_stream_with_one_terminal_event(
    steps: list[Any], max_turn: int, cancel_at: int | None, fallback_fails: bool
) -> None:
    script = list(steps)

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        if messages[0]["content"] == FALLBACK_PROMPT:
            if fallback_fails:
                raise ModelHTTPError(503, "down")
            return text_reply("fallback")
        step = script.pop(0) if script else "text"
        if step == "text":
            return text_reply("answer")
        if step == "error":
            raise ModelHTTPError(500, "boom")
        return tools_reply(*(make_call(kind, i) for i, kind in enumerate(step)))

    async def main() -> None:
        events: list[EventDict] = []
        async with open_weather_manager(FunctionModel(answer, chunk_size=3), max_turn=max_turn) as manager:
            async with manager.open_run("a", "Q", thread_id="t") as stream:
                async for event in stream:
                    events.append(event)
                    if cancel_at is not None and len(events) == cancel_at:
                        stream.cancel()
            check_stream(events)
            assert stream.result is not None
            history = manager.history("t")
            assert_history_is_valid(history)
            results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
            assert len(results) == len(stream.result.tool_results) == sum(m["role"] == "tool" for m in history)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def assert_history_is_valid(history: Sequence[Message]) -> None:
    """Every assistant tool call is answered by exactly one tool message, in order, right after it."""
    index = 0
    while index < len(history):
        message = history[index]
        index += 1
        calls = message.get("tool_calls") or []
        answered = [m["tool_call_id"] for m in history[index : index + len(calls)] if m["role"] == "tool"]
        assert answered == [c["id"] for c in calls]
        index += len(calls)


def test_run_result_is_a_frozen_value() -> None:
    result = RunResult("r", "t", "x", (), Usage(), Outcome.ANSWERED)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        result.text = "y"  # type: ignore[misc]


async def test_reasoning_and_an_unstreamed_completion_become_events() -> None:
    class Silent:
        """A model that never reports deltas (a non-streaming endpoint)."""

        name = "silent"

        async def complete(self, messages: Any, tools: Any, *, on_delta: Any = None) -> Completion:
            return Completion(text="whole answer", reasoning="thought", tool_calls=())

    result = await run_once(Silent())
    check_stream(result.events)
    assert [e["delta"] for e in result.events if e["type"] == "TEXT_MESSAGE_CONTENT"] == ["whole answer"]
    reasoning = scripted(Completion(text="x", reasoning="because"))
    streamed = await run_once(reasoning)
    check_stream(streamed.events)
    assert [e["delta"] for e in streamed.events if e["type"] == "REASONING_MESSAGE_CONTENT"] == ["beca", "use"]


async def create_delegates(ctx: HookContext, messages: list[Message]) -> dict[str, Any]:
    return {"delegate": "helper"}


async def test_create_hook_delegates_the_whole_run() -> None:
    model = scripted(text_reply("helper speaking"))
    helper = AssistantSpec(id="helper", model="m", prompt=("H",))
    async with open_weather_manager(
        model, helper, hooks=Hooks(create="tests.test_conversation:create_delegates")
    ) as manager:
        result = await manager.run("a", "Q", thread_id="t")
        history = manager.history("t")
    check_stream(result.events)
    assert result.text == "helper speaking"
    assert model.calls[0].messages == ({"role": "system", "content": "H"}, {"role": "user", "content": "Q"})
    started = next(e for e in result.events if e["type"] == "SUBAGENT_STARTED")
    assert started["name"] == "helper"
    assert history == ({"role": "user", "content": "Q"}, {"role": "assistant", "content": "helper speaking"})


async def test_two_first_runs_of_a_thread_share_one_actor() -> None:
    model = FunctionModel(lambda messages, tools: f"{len(messages)} messages")
    with trio.fail_after(10):
        async with open_weather_manager(model) as manager:
            results: list[RunResult] = []

            async def ask(question: str) -> None:
                results.append(await manager.run("a", question, thread_id="t"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask, "one")
                nursery.start_soon(ask, "two")
            assert manager.statistics() == ConversationStatistics(threads=1, actors=1)
            assert len(manager.history("t")) == 4
    assert sorted(r.text for r in results) == ["2 messages", "4 messages"]


async def test_close_thread_ends_its_actor_and_the_next_run_loads_the_history_from_the_store() -> None:
    model = FunctionModel(lambda messages, tools: f"{len(messages)} messages")
    with trio.fail_after(10):
        async with open_weather_manager(model) as manager:
            await manager.run("a", "one", thread_id="t")
            assert len(manager.history("t")) == 2
            assert manager.statistics() == ConversationStatistics(threads=1, actors=1)
            manager.close_thread("t")
            await trio.testing.wait_all_tasks_blocked()
            assert manager.statistics() == ConversationStatistics(threads=0, actors=0)
            assert manager.history("t") == ()  # out of memory ...
            again = await manager.run("a", "two", thread_id="t")
    assert again.text == "4 messages"  # ... but not out of the store: prompt, "one", its answer, "two"


# --------------------------------------------------------------------------- bounds


async def test_threads_are_bounded_and_the_least_recently_used_idle_one_is_forgotten() -> None:
    model = scripted(*(text_reply(f"answer {i}") for i in range(6)))
    async with open_weather_manager(model, limits={"max_threads": 3}) as manager:
        first = await manager.run("a", "Q0", thread_id="t0")
        for i in range(1, 4):
            await manager.run("a", f"Q{i}", thread_id=f"t{i}")
        await manager.run("a", "again", thread_id="t1")  # t1 becomes the most recently used
        await manager.run("a", "Q5", thread_id="t5")
        await trio.testing.wait_all_tasks_blocked()
        assert manager.statistics() == ConversationStatistics(threads=3, actors=3)
        assert manager.history("t0") == ()
        assert manager.history("t2") == ()
        assert [m["content"] for m in manager.history("t1") if m["role"] == "user"] == ["Q1", "again"]
        assert manager.history("t5")
    assert first.text == "answer 0"


async def test_a_consumer_too_slow_for_the_close_out_still_gets_one_terminal_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    long_text = "x" * 400  # with chunk_size=4: far more events than the stream's buffer holds
    async with open_weather_manager(scripted(text_reply(long_text))) as manager, manager.open_run("a", "Q") as stream:
        await trio.sleep(1)  # the run fills the buffer and waits for the consumer
        stream.cancel()
        await trio.sleep(60)  # the close-out's grace runs out while nobody reads
        events = [event async for event in stream]
    check_stream(events)
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["outcome"] == {"type": "cancelled"}


async def test_a_thread_handle_holds_only_the_send_side_and_the_status() -> None:
    async with open_weather_manager(scripted(text_reply("hi"))) as manager:
        handle = await manager.thread("t")
        held = [getattr(handle, field.name) for field in attrs.fields(type(handle))]
    assert [type(value).__name__ for value in held] == ["str", "NoneType", "MemorySendChannel", "ThreadStatus"]
