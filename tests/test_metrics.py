"""The Prometheus metrics a run moves (read from the registry as deltas: other tests count too)."""

from __future__ import annotations

import trio
import trio.testing
from prometheus_client import REGISTRY

from tests.test_tracing import batch_then_answer, config, scripted
from yao_actors.errors import ModelTimeout
from yao_actors.models import Completion, FunctionModel, ToolCall, Usage
from yao_actors.runtime import open_runtime


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_a_run_counts_its_tool_calls_model_calls_and_tokens() -> None:
    calls = (ToolCall("c1", "test__echo", '{"text": "x"}'), ToolCall("c2", "invented__tool", "{}"))
    model = batch_then_answer(calls, "done", usage=(Usage(100, 7, 107), Usage(120, 9, 129)))
    before = {
        "runs": value("yao_runs_total", assistant="helper", outcome="answered"),
        "echo": value("yao_tool_calls_total", server="test", tool="echo", kind="ok"),
        "unknown": value("yao_tool_calls_total", server="", tool="", kind="unknown_tool"),
        "timed": value("yao_tool_call_duration_seconds_count", server="test"),
        "model": value("yao_model_calls_total", model="scripted", outcome="ok"),
        "input": value("yao_model_tokens_total", model="scripted", type="input"),
        "output": value("yao_model_tokens_total", model="scripted", type="output"),
        "durations": value("yao_run_duration_seconds_count"),
    }
    with trio.fail_after(30):
        async with open_runtime(config(), models={"scripted": model}) as runtime:
            await runtime.run("helper", "echo x")
            # Counted before the result is handed over: whoever saw the run end sees it in the metrics.
            active = value("yao_active_runs")
            assert value("yao_runs_total", assistant="helper", outcome="answered") - before["runs"] == 1
            assert value("yao_run_duration_seconds_count") - before["durations"] == 1
    assert value("yao_tool_calls_total", server="test", tool="echo", kind="ok") - before["echo"] == 1
    # A made-up tool name never becomes a label value.
    assert value("yao_tool_calls_total", server="", tool="", kind="unknown_tool") - before["unknown"] == 1
    assert value("yao_tool_calls_total", server="", tool="invented__tool", kind="unknown_tool") == 0
    assert value("yao_tool_call_duration_seconds_count", server="test") - before["timed"] == 1
    assert value("yao_model_calls_total", model="scripted", outcome="ok") - before["model"] == 2
    assert value("yao_model_tokens_total", model="scripted", type="input") - before["input"] == 220
    assert value("yao_model_tokens_total", model="scripted", type="output") - before["output"] == 16
    assert active == 0


async def test_a_model_timeout_is_counted_as_one() -> None:
    def fn(messages: object, tools: object) -> Completion:
        raise ModelTimeout("the endpoint did not answer")

    before = value("yao_model_calls_total", model="slow", outcome="timeout")
    errors = value("yao_runs_total", assistant="helper", outcome="error")
    with trio.fail_after(30):
        async with open_runtime(config("slow"), models={"slow": FunctionModel(fn, name="slow")}) as runtime:
            result = await runtime.run("helper", "hello")
    assert result.code == "model_error"
    assert value("yao_model_calls_total", model="slow", outcome="timeout") - before == 1
    assert value("yao_runs_total", assistant="helper", outcome="error") - errors == 1


async def test_a_streamed_run_is_counted_before_its_terminal_event_arrives() -> None:
    # A client that scrapes /metrics as soon as it sees RUN_FINISHED must find the run counted (CI saw it missing).
    model = scripted(Completion(text="done", usage=Usage(1, 1, 2)))
    before = value("yao_runs_total", assistant="helper", outcome="answered")
    with trio.fail_after(30):
        async with (
            open_runtime(config(), models={"scripted": model}) as runtime,
            runtime.open_run("helper", "hello") as stream,
        ):
            async for event in stream:
                if event["type"] == "RUN_FINISHED":
                    counted = value("yao_runs_total", assistant="helper", outcome="answered") - before
                    active = value("yao_active_runs")
    assert (counted, active) == (1, 0)
