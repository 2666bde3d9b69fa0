"""The acceptance scenarios of the seed (the tool loop of the Yao agent framework this project re-creates), by number.

One test per scenario, named ``test_sNN_...``. Where the project fixes a fault of the
seed (docs/contributing.md, "The seed, kept and fixed") the test pins the fixed behaviour and its docstring says
"deviation" and why; everything else is the seed's own behaviour.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.dispatch_support import ScriptedServer, scripted_server, serving, tool
from tests.test_catalog import listed_server, servers_of
from tests.test_conversation import (
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
from yao_actors.config import AssistantSpec, Hooks, Sample, ServerRef, max_turns, parse_config, tool_loop_enabled
from yao_actors.conversation import build_request
from yao_actors.conversation.loop.fallback import FALLBACK_ASSISTANT_ID, build_fallback_brief
from yao_actors.conversation.loop.hooks import HookContext, ResolvedHooks, run_create
from yao_actors.conversation.loop.prompt import TOOL_RETRY_PROMPT, request_tools
from yao_actors.errors import ConfigError, ErrorKind, ModelHTTPError
from yao_actors.events import Outcome
from yao_actors.models.base import Completion, Message, ToolCall
from yao_actors.tools.arguments import parse_arguments
from yao_actors.tools.catalog import SAMPLES_HEADER, Catalog, build_catalog, select_servers
from yao_actors.tools.dispatch import collect_tool_calls
from yao_actors.tools.naming import encode_tool_name, parse_tool_name
from yao_actors.tools.results import ToolCallResult, parse_content

SEED_TOOL_COUNT = 20

# --------------------------------------------------------------------------- names


def test_s01_tool_name_encoding() -> None:
    assert encode_tool_name("github.enterprise", "search") == "github_enterprise__search"
    assert encode_tool_name("", "x") == ""


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("echo___private", ("echo", "_private", True)),
        ("a__b__c", ("", "", False)),
        ("__", ("", "", False)),
        ("echo__", ("", "", False)),
        ("echo_ping", ("", "", False)),
        ("my_server__x", ("my.server", "x", True)),
    ],
)
def test_s02_tool_name_parsing(name: str, parsed: tuple[str, str, bool]) -> None:
    assert parse_tool_name(name) == parsed


# --------------------------------------------------------------------------- build


async def test_s03_the_cap_takes_20_tools_and_never_lists_the_next_server() -> None:
    a = listed_server("a", [tool(f"t{i:02}") for i in range(25)])
    b = listed_server("b", [tool("x")])
    catalog = await build_catalog([ServerRef("a"), ServerRef("b")], servers_of(a, b), max_tools=SEED_TOOL_COUNT)
    assert [entry.name for entry in catalog.entries] == [f"a__t{i:02}" for i in range(20)]
    assert b.list_calls == 0
    (warning,) = catalog.warnings
    assert "tool limit of 20 reached" in warning


async def test_s04_a_filter_keeps_its_tools_in_server_order_and_ignores_missing_names() -> None:
    a = listed_server("a", [tool("ping"), tool("status"), tool("echo")])
    catalog = await build_catalog([ServerRef("a", ("echo", "ping", "missing"))], servers_of(a))
    assert [entry.name for entry in catalog.entries] == ["a__ping", "a__echo"]


def create_b(ctx: HookContext, messages: list[Message]) -> dict[str, Any]:
    return {"mcp_servers": [{"server_id": "b"}]}


def create_empty(ctx: HookContext, messages: list[Message]) -> dict[str, Any]:
    return {"mcp_servers": []}


@pytest.mark.parametrize(("hook", "servers"), [(create_b, ["b"]), (create_empty, ["a"])])
async def test_s05_hook_mcp_servers_replace_the_list_unless_empty(hook: Any, servers: list[str]) -> None:
    spec = AssistantSpec("x", "m", servers=(ServerRef("a"),))
    created = await run_create(ResolvedHooks(create=hook), HookContext("x", "t", "r"), [])
    assert [ref.server_id for ref in select_servers(spec, created.servers or ())] == servers


async def samples_catalog(samples: dict[str, tuple[Sample, ...]]) -> Catalog:
    server = listed_server("echo", [tool("ping", description="Ping it")], samples=samples)
    return await build_catalog([ServerRef("echo")], servers_of(server))


async def test_s06_samples_three_per_tool_unnamed_and_json_input() -> None:
    """Deviation: inputs render as JSON (``{"count":1}``), not Go's ``map[count:1]``."""
    five = tuple(Sample(input={"count": i}, name="" if i == 1 else f"n{i}") for i in range(1, 6))
    message = (await samples_catalog({"ping": five})).samples_message
    assert message.startswith(SAMPLES_HEADER)
    assert '**Example 1**:\n- Input: `{"count":1}`\n' in message
    assert "**Example 3 - n3**" in message
    assert "Example 4" not in message
    described = parse_config(
        {
            "mcpServers": {
                "s": {
                    "command": "x",
                    "samples": {
                        "t": [{"metadata": {"description": "from metadata"}}, {"metadata": {"description": 3}}]
                    },
                }
            },
            "models": {},
            "assistants": {},
        }
    )
    first, second = described.servers["s"].samples["t"]
    assert (first.description, second.description) == ("from metadata", "")
    assert (await samples_catalog({})).samples_message == ""


async def test_s07_request_order_and_tools_after_static_options_tools() -> None:
    catalog = await samples_catalog({"ping": (Sample(input={}),)})
    static = {"type": "function", "function": {"name": "static", "description": "", "parameters": {}}}
    spec = AssistantSpec("x", "m", prompt=("P",), options={"tools": [static]})
    messages = build_request((), spec, catalog, [{"role": "user", "content": "Q"}])
    assert [m["role"] for m in messages] == ["system", "system", "user"]
    assert messages[1]["content"].startswith("\n\n## MCP Tool Usage Examples")
    tools = request_tools(spec, catalog)
    assert tools[0] == static
    assert tools[1] == {
        "type": "function",
        "function": {"name": "echo__ping", "description": "Ping it", "parameters": {"type": "object"}},
    }


# --------------------------------------------------------------------------- execution, single call


async def dispatch_one(arguments: str, server: ScriptedServer | None = None, name: str = "w__get") -> ToolCallResult:
    (result,) = await dispatch_many([ToolCall("c1", name, arguments)], server or weather_server())
    return result


def test_s08_empty_arguments() -> None:
    """Deviation: ``""`` is the empty object, validated like any other, not ``None`` unchecked."""
    assert parse_arguments("").value == {}


async def test_s09_an_array_is_not_an_object() -> None:
    result = await dispatch_one("[1]")
    assert result.kind is ErrorKind.INVALID_ARGUMENTS
    assert result.retryable
    assert result.error == "invalid arguments: arguments must be a JSON object, got array"


async def test_s10_schema_violations_are_retryable_and_name_the_field() -> None:
    result = await dispatch_one('{"city": 3}')
    assert result.kind is ErrorKind.INVALID_ARGUMENTS
    assert result.retryable
    assert "city: 3 is not of type 'string'" in (result.error or "")


async def test_s11_an_unknown_server_does_not_fail_the_request() -> None:
    """Deviation: ``unknown_tool`` is retryable and goes to the model; the run goes on."""
    result = await dispatch_one("{}", name="zzz__t")
    assert (result.kind, result.retryable) == (ErrorKind.UNKNOWN_TOOL, True)
    run = await run_once(scripted(tools_reply(call("zzz__t", {})), text_reply("no such tool")))
    assert (run.outcome, run.text) == (Outcome.ANSWERED, "no such tool")


@pytest.mark.parametrize(("text", "retryable"), [("bad input", True), ("upstream timeout", False)])
async def test_s12_tool_errors_are_retryable_unless_they_name_an_infrastructure_fault(
    text: str, retryable: bool
) -> None:
    result = await dispatch_one(f'{{"message": "{text}"}}', scripted_server("s"), name="s__fail")
    assert (result.kind, result.error, result.retryable) == (ErrorKind.TOOL_ERROR, text, retryable)


# --------------------------------------------------------------------------- execution, several calls


async def dispatch_many(calls: list[ToolCall], *scripted: ScriptedServer) -> list[ToolCallResult]:
    """The calls executed by real server actors over the scripted servers."""
    async with serving(*scripted) as handles:
        catalog = await build_catalog([ServerRef(server.id) for server in scripted], handles)
        return await collect_tool_calls(calls, catalog, handles)


async def test_s13_results_come_back_in_call_order() -> None:
    """Improved order (the spec's "original order" option): ``tool_calls`` order, across servers."""
    calls = [ToolCall("1", "a__echo", '{"n": 1}'), ToolCall("2", "a__echo", '{"n": 2}'), ToolCall("3", "b__echo", "{}")]
    results = await dispatch_many(calls, scripted_server("a"), scripted_server("b"))
    assert [r.call_id for r in results] == ["1", "2", "3"]
    assert all(r.ok for r in results)


async def test_s14_malformed_arguments_in_a_batch_get_their_own_result() -> None:
    """Deviation: the call is not dropped; its result says the JSON was invalid."""
    a = scripted_server("a")
    results = await dispatch_many([ToolCall("1", "a__echo", "{}"), ToolCall("2", "a__echo", "{bad")], a)
    assert [r.ok for r in results] == [True, False]
    assert (results[1].error or "").startswith("invalid arguments: not valid JSON")
    assert a.executions["echo"] == 1


async def test_s15_the_sequential_retry_reruns_only_the_failed_call() -> None:
    """Deviation: a call that succeeded is never run again: a retry re-sends only failed calls."""
    a = scripted_server("a")
    results = await dispatch_many([ToolCall("1", "a__echo", "{}"), ToolCall("2", "a__flaky", "{}")], a)
    assert all(r.ok for r in results)
    assert (a.executions["echo"], a.executions["flaky"]) == (1, 2)
    assert [r.sequential_retry for r in results] == [False, True]


# --------------------------------------------------------------------------- retry block


async def test_s16_a_retry_with_corrected_calls() -> None:
    """Deviation: the retry request ends with a real instruction, not the raw i18n key."""
    model = scripted(
        tools_reply(call("w__get", {"town": "x"}, "c1")),
        tools_reply(call("w__get", {"city": "B"}, "c2")),
        text_reply("ok"),
    )
    result = await run_once(model)
    assert [r.call_id for r in result.tool_results] == ["c1", "c2"]
    assert model.calls[1].messages[-1] == {"role": "system", "content": TOOL_RETRY_PROMPT}
    assert "assistant.agent.tool_retry_prompt" not in TOOL_RETRY_PROMPT


async def test_s17_three_failing_executions_let_the_model_answer() -> None:
    """Deviation: no "tool calls failed after 3 attempts" failure; the model answers from the errors."""
    bad = tools_reply(call("w__get", {"town": "x"}))
    result = await run_once(scripted(bad, bad, bad, text_reply("could not")))
    check_stream(result.events)
    assert len(result.tool_results) == 3
    assert (result.outcome, result.text) == (Outcome.ANSWERED, "could not")


async def test_s18_a_text_answer_to_a_retry_is_the_answer() -> None:
    """Deviation: accepted as the answer, not "LLM did not return tool calls in retry attempt 1"."""
    result = await run_once(scripted(tools_reply(call("w__get", {"town": "x"})), text_reply("plain")))
    assert (result.outcome, result.text) == (Outcome.ANSWERED, "plain")


# --------------------------------------------------------------------------- loop


async def test_s19_the_loop_converging_in_turn_one() -> None:
    model = scripted(tools_reply(call("w__get", {"city": "B"}, "c1")), text_reply("25"))
    result = await run_once(model)
    assert len(model.calls) == 2
    turn_one = model.calls[1].messages
    assert [m["role"] for m in turn_one] == ["system", "user", "assistant", "tool"]
    assert turn_one[3] == {"role": "tool", "tool_call_id": "c1", "content": '{"city":"B","temp":25}'}
    assert [r.call_id for r in result.tool_results] == ["c1"]
    assert result.text == "25"


async def test_s20_max_turn_two_then_the_fallback_with_every_result() -> None:
    """Deviation: the brief carries the results of every turn, not only the first round."""

    def tools_again(messages: list[dict[str, Any]]) -> Completion:
        n = sum(1 for m in messages if m.get("role") == "tool")
        return tools_reply(call("w__get", {"city": f"C{n}"}, f"c{n}"))

    model = scripted(tools_again, tools_again, tools_again, text_reply("synthesised"))
    server = weather_server()
    async with open_weather_manager(model, server=server, max_turn=2) as manager:
        result = await manager.run("a", "Q")
    assert server.executions["get"] == 3
    assert result.note == "tool loop reached max turns (2)"
    brief = model.calls[-1].messages[-1]["content"]
    assert all(f'"city":"C{n}"' in brief for n in range(3))


@pytest.mark.parametrize(("raw", "model_calls"), [(False, 1), ("false", 2)])
async def test_s21_only_a_real_false_disables_the_loop(raw: Any, model_calls: int) -> None:
    model = scripted(tools_reply(call("w__get", {"city": "B"})), text_reply("looped"))
    result = await run_once(model, tool_loop=tool_loop_enabled(raw))
    assert len(model.calls) == model_calls
    assert [r.ok for r in result.tool_results] == [True]


def test_s22_max_turn_values() -> None:
    """Deviation: ``0.5`` (zero turns in the seed) and ``Infinity`` are configuration errors."""
    assert max_turns("3") == 5
    assert max_turns(0.5) == 0  # the seed's rule, kept as a helper; the reader refuses the value
    for value in (0.5, float("inf")):
        options = {"mcp": {"options": {"max_turn": value}}, "model": "demo"}
        with pytest.raises(ConfigError, match=r"assistants\.a\.mcp\.options\.max_turn"):
            parse_config({"models": {}, "assistants": {"a": options}})


def create_nothing(ctx: HookContext, messages: list[Message]) -> None:
    return None


async def test_s23_a_hook_without_next_keeps_the_loop() -> None:
    """Deviation: only a configured ``next`` takes branch A (the seed took it for any hook script)."""
    model = scripted(tools_reply(call("w__get", {"city": "B"})), text_reply("looped"))
    result = await run_once(model, hooks=Hooks(create="tests.test_seed_scenarios:create_nothing"))
    assert (len(model.calls), result.text) == (2, "looped")


async def test_s24_a_failing_fallback_still_ends_with_an_answer() -> None:
    """Deviation: the run finishes with the last text (or the tool results), not the tool-call completion."""

    def down(messages: list[dict[str, Any]]) -> Completion:
        raise ModelHTTPError(500, "down")

    model = scripted(tools_reply(call("w__get", {"city": "B"}), text="looking"), down, down)
    result = await run_once(model)
    check_stream(result.events)
    assert (result.outcome, result.text) == (Outcome.DEGRADED, "looking")
    assert result.events[-1]["type"] == "RUN_FINISHED"


def test_s25_the_fallback_brief_golden() -> None:
    results = [
        ToolCallResult("1", "w__f", "w", "f", "{}", result={"t": 25}),
        ToolCallResult("2", "x", "", "x", "{}", error="E", kind=ErrorKind.UNKNOWN_TOOL),
    ]
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "A"},
    ]
    assert build_fallback_brief([], messages, results) == (
        "## Assistant Context\n\nS\n\n## Conversation\n\n**User**: Q\n\n**Assistant**: A\n\n## Tool Results\n\n"
        '### w.f\n```json\n{"t":25}\n```\n\n### x\nError: E\n\n---\n'
        "Please answer the user's question based on the above context and tool results.\n"
        "Respond in the same language as the user.\n"
    )


# --------------------------------------------------------------------------- ParsedContent


@pytest.mark.parametrize(
    ("blocks", "parsed"),
    [
        ([{"type": "text", "text": '{"a":1}'}], {"a": 1}),
        ([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], ["a", "b"]),
        (
            [{"type": "image", "data": "..", "mimeType": "image/png"}],
            {"type": "image", "data": "..", "mimeType": "image/png"},
        ),
        ([{"type": "text"}], None),
        ([], None),
    ],
)
def test_s26_parsed_content(blocks: list[dict[str, Any]], parsed: Any) -> None:
    assert parse_content(blocks) == parsed


# --------------------------------------------------------------------------- streaming


async def test_s27_streaming_one_start_one_end_results_as_they_finish_and_an_attributed_fallback() -> None:
    """Deviation: ``TOOL_CALL_RESULT`` streams while tools run (the seed sent nothing then)."""

    def tools_again(messages: list[dict[str, Any]]) -> Completion:
        return tools_reply(call("w__get", {"city": "B"}, f"c{len(messages)}"))

    model = scripted(tools_again, tools_again, text_reply("synthesised"))
    result = await run_once(model, max_turn=1)
    check_stream(result.events)
    kinds = types(result.events)
    assert (kinds.count("RUN_STARTED"), kinds.count("RUN_FINISHED")) == (1, 1)
    first_result = kinds.index("TOOL_CALL_RESULT")
    assert "STEP_STARTED" in kinds[first_result:]  # the result came before the next model call, not at the end
    started = next(e for e in result.events if e["type"] == "SUBAGENT_STARTED")
    assert started["name"] == FALLBACK_ASSISTANT_ID
    fallback_text = [e for e in result.events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert fallback_text
    assert all(e["subagentRunId"] == started["subagentRunId"] for e in fallback_text)
