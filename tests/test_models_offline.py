"""The offline models: FunctionModel streaming and call log, TestModel arguments, DemoModel's scenario steps."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import mcp
import pytest
import trio
import trio.lowlevel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yao_actors.config import ModelSpec
from yao_actors.config.providers import build_model
from yao_actors.demo import clothing, weather
from yao_actors.demo.model import DemoModel
from yao_actors.models import (
    Completion,
    Delta,
    FunctionModel,
    Model,
    ReasoningDelta,
    TestModel,
    TextDelta,
    ToolCall,
    ToolCallDelta,
)
from yao_actors.models.base import with_params, with_tool_hints
from yao_actors.models.offline import KEPT_CALLS
from yao_actors.tools.hints import ToolHints


def _tool(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": name, "parameters": parameters}}


async def _run(
    model: Model, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> tuple[Completion, list[Delta]]:
    deltas: list[Delta] = []

    async def on_delta(delta: Delta) -> None:
        deltas.append(delta)

    return await model.complete(messages, tools, on_delta=on_delta), deltas


# --------------------------------------------------------------------------- FunctionModel


async def test_function_model_streams_text_and_tool_calls_in_chunks() -> None:
    answer = Completion(
        text="Hello world",
        reasoning="why",
        tool_calls=(ToolCall("c1", "a__b", '{"x":1}'),),
        finish_reason="tool_calls",
    )
    model = FunctionModel(lambda messages, tools: answer, chunk_size=4)
    completion, deltas = await _run(model, [{"role": "user", "content": "hi"}], [])
    assert completion == answer
    assert deltas == [
        ReasoningDelta("why"),
        TextDelta("Hell"),
        TextDelta("o wo"),
        TextDelta("rld"),
        ToolCallDelta(index=0, id="c1", name="a__b"),
        ToolCallDelta(index=0, arguments='{"x"'),
        ToolCallDelta(index=0, arguments=":1}"),
    ]


async def test_function_model_without_streaming_reports_no_deltas() -> None:
    answer = Completion(text="Hello", tool_calls=(ToolCall("c1", "a__b", '{"x":1}'),), finish_reason="tool_calls")
    model = FunctionModel(lambda messages, tools: answer, stream=False)
    completion, deltas = await _run(model, [{"role": "user", "content": "hi"}], [])
    assert completion == answer
    assert deltas == []
    assert [call.completion for call in model.calls] == [answer]


async def test_function_model_keeps_its_most_recent_calls() -> None:
    """Each kept call holds the history it was given: a long-lived model must not keep them all (issue 29)."""
    asked = [[{"role": "user", "content": str(n)}] for n in range(KEPT_CALLS + 5)]
    answers = [str(n) for n in range(len(asked))]
    models = {
        KEPT_CALLS: FunctionModel(lambda m, t: m[-1]["content"]),  # the default
        len(asked): FunctionModel(lambda m, t: m[-1]["content"], keep_calls=None),  # every call, as it used to
        3: FunctionModel(lambda m, t: m[-1]["content"], keep_calls=3),
        0: FunctionModel(lambda m, t: m[-1]["content"], keep_calls=0),
    }
    for kept, model in models.items():
        for messages in asked:
            await model.complete(messages, [])
        assert model.call_count == len(asked)
        assert [call.completion.text for call in model.calls] == answers[len(answers) - kept :]


async def test_the_offline_models_count_calls_they_no_longer_keep() -> None:
    """Tool call ids go on from the count of calls, not from what is kept: ids stay unique."""
    ask = [{"role": "user", "content": "北京今天适合穿什么?"}]
    demo = DemoModel(keep_calls=0)
    tools = [_tool("weather__get", {}), _tool("clothing__advise", {})]
    ids = [(await demo.complete(ask, tools)).tool_calls[0].id for _ in range(3)]
    assert ids == ["call_demo_0", "call_demo_1", "call_demo_2"]
    test = TestModel(keep_calls=1, include_writes=True)
    ids = [(await test.complete(ask, [_tool("t", {})])).tool_calls[0].id for _ in range(3)]
    assert ids == ["call_test_0_0", "call_test_1_0", "call_test_2_0"]
    assert (len(demo.calls), len(test.calls), demo.call_count, test.call_count) == (0, 1, 3, 3)


def test_the_models_a_config_builds_keep_no_calls() -> None:
    for provider in ("demo", "test"):
        model = build_model(ModelSpec(id=provider, provider=provider))
        assert isinstance(model, FunctionModel)
        assert model.calls.maxlen == 0


async def test_function_model_accepts_async_functions_and_plain_text() -> None:
    async def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        await trio.lowlevel.checkpoint()
        return f"{len(messages)} messages, {len(tools)} tools"

    model = FunctionModel(answer, name="counter")
    completion, deltas = await _run(model, [{"role": "user", "content": "hi"}], [_tool("t", {})])
    assert completion.text == "1 messages, 1 tools"
    assert deltas == [TextDelta("1 messages, 1 tools")]
    assert model.name == "counter"
    assert isinstance(model, Model)


async def test_function_model_keeps_a_log_of_copies() -> None:
    messages = [{"role": "user", "content": "hi"}]
    model = FunctionModel(lambda m, t: "ok")
    await model.complete(messages, [])
    messages.append({"role": "assistant", "content": "later"})
    (call,) = model.calls
    assert call.messages == ({"role": "user", "content": "hi"},)
    assert call.completion == Completion(text="ok")


# --------------------------------------------------------------------------- TestModel

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Beijing", "Tokyo"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "units": {"$ref": "#/$defs/Units"},
        "where": {"type": "object", "properties": {"lat": {"type": "number", "minimum": -90, "maximum": 90}}},
    },
    "required": ["city", "days"],
    "$defs": {"Units": {"type": "string", "enum": ["metric", "imperial"]}},
}


async def test_test_model_calls_every_tool_once_then_summarises() -> None:
    tools = [_tool("weather__get", WEATHER_SCHEMA), _tool("time__now", {"type": "object", "properties": {}})]
    model = TestModel(seed=3, include_writes=True)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    first, deltas = await _run(model, messages, tools)
    assert [call.name for call in first.tool_calls] == ["weather__get", "time__now"]
    assert len({call.id for call in first.tool_calls}) == 2
    assert [d.name for d in deltas if isinstance(d, ToolCallDelta) and d.name] == ["weather__get", "time__now"]
    arguments = json.loads(first.tool_calls[0].arguments)
    jsonschema.validate(arguments, WEATHER_SCHEMA)
    assert arguments["units"] in ("metric", "imperial")

    messages.append(first.to_message())
    messages += [
        {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": '{"temp":3}'},
        {"role": "tool", "tool_call_id": first.tool_calls[1].id, "content": "Error: clock stopped"},
    ]
    second, _ = await _run(model, messages, tools)
    assert second.tool_calls == ()
    assert 'weather__get: {"temp":3}' in second.text
    assert "time__now: Error: clock stopped" in second.text


async def test_test_model_is_deterministic_per_seed() -> None:
    tools = [_tool("weather__get", WEATHER_SCHEMA)]
    messages = [{"role": "user", "content": "go"}]
    same = [await TestModel(seed=7, include_writes=True).complete(messages, tools) for _ in range(2)]
    assert same[0] == same[1]
    others = {
        (await TestModel(seed=seed, include_writes=True).complete(messages, tools)).tool_calls[0].arguments
        for seed in range(8)
    }
    assert len(others) > 1


async def test_test_model_calls_only_read_only_tools_unless_told_and_names_those_it_skipped() -> None:
    """Random arguments to a tool that writes could change anything: the run tells the model which tools are
    read-only, and it calls only those unless an assistant's options say ``include_writes``."""
    tools = [_tool("fs__read_file", {}), _tool("fs__write_file", {}), _tool("fs__delete", {})]
    hints = {"fs__read_file": ToolHints(read_only=True), "fs__write_file": ToolHints(), "fs__delete": ToolHints()}
    go: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    model = with_tool_hints(with_params(TestModel(), {}), hints)
    first = await model.complete(go, tools)
    assert [call.name for call in first.tool_calls] == ["fs__read_file"]
    done = [*go, first.to_message(), {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "ok"}]
    summary = (await model.complete(done, tools)).text
    assert "Skipped 2 tool(s) not marked read-only" in summary
    assert "fs__write_file, fs__delete" in summary
    assert '"include_writes": true' in summary
    told = with_tool_hints(with_params(TestModel(), {"include_writes": True}), hints)
    assert [call.name for call in (await told.complete(go, tools)).tool_calls] == [
        "fs__read_file",
        "fs__write_file",
        "fs__delete",
    ]
    nothing_read_only = await with_tool_hints(TestModel(), {"fs__delete": ToolHints()}).complete(go, tools[2:])
    assert nothing_read_only.tool_calls == ()
    assert nothing_read_only.text.startswith("Called no tool.")
    assert "fs__delete" in nothing_read_only.text


async def test_test_model_without_tools_says_so() -> None:
    completion = await TestModel().complete([{"role": "user", "content": "go"}], [])
    assert completion.tool_calls == ()
    assert "No tools" in completion.text


async def test_test_model_arguments_satisfy_the_demo_servers_real_schemas() -> None:
    model = TestModel()
    with trio.fail_after(30):
        for server in (weather.build_server(), clothing.build_server()):
            async with mcp.Client(server) as client:
                listed = await client.list_tools()
            for tool in listed.tools:
                arguments = model.arguments_for(_tool(tool.name, tool.input_schema))
                jsonschema.validate(arguments, tool.input_schema)


def _bounded(
    kind: str, low: float | None, span: float, flags: tuple[bool, bool, bool], step: int = 1
) -> dict[str, Any]:
    """A numeric schema: an optional lower bound, an optional upper one ``span`` above, each maybe exclusive."""
    exclusive_low, exclusive_high, has_high = flags
    schema: dict[str, Any] = {"type": kind, "multipleOf": step} if step > 1 else {"type": kind}
    if low is not None:
        schema["exclusiveMinimum" if exclusive_low else "minimum"] = low
    if has_high:
        schema["exclusiveMaximum" if exclusive_high else "maximum"] = (low or 0) + span
    return schema


FLAGS = st.tuples(st.booleans(), st.booleans(), st.booleans())


def _integer_schema() -> st.SearchStrategy[dict[str, Any]]:
    return st.integers(1, 5).flatmap(
        lambda step: st.builds(
            _bounded,
            st.just("integer"),
            st.none() | st.integers(-1000, 1000),
            st.integers(2 * step + 2, 60),
            FLAGS,
            st.just(step),
        )
    )


def _number_schema() -> st.SearchStrategy[dict[str, Any]]:
    bound = st.floats(-1e4, 1e4, allow_nan=False)
    return st.builds(_bounded, st.just("number"), st.none() | bound, st.floats(0.5, 100), FLAGS)


def _string_schema() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda low, extra: {"type": "string", "minLength": low, "maxLength": low + extra},
        st.integers(0, 5),
        st.integers(0, 10),
    )


SCALARS = st.none() | st.booleans() | st.integers(-100, 100) | st.text(max_size=5)
LEAVES = (
    _integer_schema()
    | _number_schema()
    | _string_schema()
    | st.just({"type": "boolean"})
    | st.just({"type": "null"})
    | st.lists(SCALARS, min_size=1, max_size=4, unique_by=lambda v: (type(v), v)).map(lambda e: {"enum": e})
    | SCALARS.map(lambda v: {"const": v})
)


def _containers(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    objects = st.dictionaries(st.text(min_size=1, max_size=6), children, max_size=4).flatmap(
        lambda props: st.builds(
            lambda required: {"type": "object", "properties": props, "required": required},
            st.lists(st.sampled_from(sorted(props)), unique=True) if props else st.just([]),
        )
    )
    arrays = st.builds(
        lambda items, low, extra: {"type": "array", "items": items, "minItems": low, "maxItems": low + extra},
        children,
        st.integers(0, 3),
        st.integers(0, 3),
    )
    choices = st.lists(children, min_size=1, max_size=3).map(lambda options: {"anyOf": options})
    return objects | arrays | choices


SCHEMAS = st.recursive(LEAVES, _containers, max_leaves=8)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(properties=st.dictionaries(st.text(min_size=1, max_size=8), SCHEMAS, max_size=5))
def test_test_model_arguments_validate_against_generated_schemas(properties: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": properties, "required": sorted(properties)}
    validator = jsonschema.Draft202012Validator(schema)
    for seed in range(20):  # many draws per schema, so values near the bounds are met too
        arguments = TestModel(seed=seed).arguments_for(_tool("any__tool", schema))
        validator.validate(arguments)
        assert set(arguments) == set(properties)


# --------------------------------------------------------------------------- DemoModel

DEMO_TOOLS = [
    _tool("weather__get", {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    _tool("clothing__advise", {"type": "object", "properties": {"temp": {}, "wind": {}, "lang": {}}}),
]


async def _demo_turns(
    question: str, results: dict[str, str], tools: list[dict[str, Any]] = DEMO_TOOLS
) -> list[Completion]:
    """Drive the demo with canned tool results until it answers in text."""
    model = DemoModel()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": question},
    ]
    completions = []
    for _ in range(4):
        completion = await model.complete(messages, tools)
        completions.append(completion)
        if not completion.tool_calls:
            return completions
        messages.append(completion.to_message())
        for call in completion.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": results[call.name]})
    raise AssertionError("the demo never answered")


RESULTS = {
    "weather__get": '{"city":"Beijing","temp":3,"wind":4,"condition":"sunny"}',
    "clothing__advise": '{"advice":"穿毛衣，外加保暖外套。"}',
}


async def test_demo_plays_the_scenario_in_chinese() -> None:
    weather_call, clothing_call, answer = await _demo_turns("北京今天适合穿什么?", RESULTS)
    assert [(c.name, json.loads(c.arguments)) for c in weather_call.tool_calls] == [
        ("weather__get", {"city": "Beijing"})
    ]
    assert [(c.name, json.loads(c.arguments)) for c in clothing_call.tool_calls] == [
        ("clothing__advise", {"temp": 3, "wind": 4, "lang": "zh"})
    ]
    assert "3°C" in answer.text
    assert "北京" in answer.text
    assert "穿毛衣，外加保暖外套。" in answer.text


async def test_demo_plays_the_scenario_in_english() -> None:
    results = {
        "weather__get": '{"city":"New York","temp":1,"wind":6,"condition":"windy"}',
        "clothing__advise": '{"advice":"Wear a warm coat over a sweater."}',
    }
    _weather, clothing_call, answer = await _demo_turns("What should I wear in new york today?", results)
    assert json.loads(clothing_call.tool_calls[0].arguments) == {"temp": 1, "wind": 6, "lang": "en"}
    assert "New York" in answer.text
    assert "1°C" in answer.text
    assert "Wear a warm coat over a sweater." in answer.text


async def test_demo_reports_a_failed_tool_honestly() -> None:
    results = {"weather__get": "Error: server 'weather' unavailable: restarting"}
    (_call, answer) = await _demo_turns("What is the weather in Tokyo?", results)
    assert "failed" in answer.text
    assert "restarting" in answer.text


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Write me a poem about the sea.", "offline demo model"),
        ("What is the population of Tokyo?", "offline demo model"),
        ("What should I wear in Paris?", "Cities I know"),
        ("帮我写一首诗", "离线演示模型"),
    ],
)
async def test_demo_says_what_it_can_do_for_anything_else(question: str, expected: str) -> None:
    (answer,) = await _demo_turns(question, {})
    assert answer.tool_calls == ()
    assert expected in answer.text


async def test_demo_without_the_weather_tool_does_not_pretend() -> None:
    (answer,) = await _demo_turns("北京今天适合穿什么?", {}, tools=[])
    assert "没有可用的天气工具" in answer.text


async def test_demo_streams_its_answer_in_chunks_and_names_itself() -> None:
    model = DemoModel()
    _completion, deltas = await _run(model, [{"role": "user", "content": "Tell me a joke"}], DEMO_TOOLS)
    assert len(deltas) > 1
    assert all(isinstance(delta, TextDelta) for delta in deltas)
    assert "demo" in model.name
    assert "offline" in model.name


async def test_demo_takes_a_deeply_nested_tool_result_as_a_failure() -> None:
    results = {"weather__get": "[" * 5000 + "]" * 5000}
    (_call, answer) = await _demo_turns("What is the weather in Tokyo?", results)
    assert answer.tool_calls == ()


async def test_test_model_gives_up_on_a_reference_cycle_of_a_clients_schema() -> None:
    cycle = {
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
        "properties": {"x": {"$ref": "#/$defs/a"}},
    }
    tool = {"type": "function", "function": {"name": "t", "parameters": {"type": "object", **cycle}}}
    with trio.fail_after(10):  # a hang guard: following the cycle never ends
        arguments = await trio.to_thread.run_sync(TestModel().arguments_for, tool, abandon_on_cancel=True)
    assert set(arguments) == {"x"}  # any value: the schema says nothing of it
