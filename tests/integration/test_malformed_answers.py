"""A server answer the MCP SDK cannot parse (nested 900 deep, a lone surrogate, not a tool's result) fails that call
at once as a ``tool_error`` saying so, in one log line without a traceback; the batch's other calls and the
server's later calls are fine. The hostile server (:mod:`tests.integration.malformed_server`) is a real process,
over stdio and over streamable HTTP (JSON bodies and event streams)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from tests.integration.processes import listening_process
from tests.support import check_stream
from yao_actors import AssistantSpec, Completion, Config, FunctionModel, Outcome, ServerRef, ToolCall, open_runtime
from yao_actors.config import HttpTransport, ServerSpec, StdioTransport
from yao_actors.errors import ErrorKind

pytestmark = pytest.mark.filterwarnings(r"ignore:Async generator '(httpx2|httpcore2)\.:ResourceWarning")

SERVER = [sys.executable, "-m", "tests.integration.malformed_server"]
BAD = ("deep", "surrogate", "shapeless")


@asynccontextmanager
async def hostile_server(transport: str) -> AsyncIterator[StdioTransport | HttpTransport]:
    if transport == "stdio":
        yield StdioTransport(SERVER[0], tuple(SERVER[1:]))
        return
    flags = ["--http", "--sse"] if transport == "http-sse" else ["--http"]
    async with listening_process([*SERVER, *flags]) as (url, _):
        yield HttpTransport(url)


def batch_model() -> FunctionModel:
    """Calls every tool of the server in one turn (``echo`` twice), then a second run calls ``echo`` alone."""

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion | str:
        if messages[-1]["role"] == "tool":
            return "done"
        if messages[-1]["content"] == "again":
            return Completion(tool_calls=[ToolCall("c_later", "bad__echo", json.dumps({"text": "later"}))])
        calls = [ToolCall(f"c_{name}", f"bad__{name}", "{}") for name in BAD]
        echoes = [ToolCall(f"c_echo{i}", "bad__echo", json.dumps({"text": f"hi {i}"})) for i in (1, 2)]
        return Completion(tool_calls=[echoes[0], *calls, echoes[1]])

    return FunctionModel(script)


@pytest.mark.parametrize("transport", ["stdio", "http-json", "http-sse"])
async def test_an_answer_that_cannot_be_parsed_fails_its_call_at_once(
    transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    assistant = AssistantSpec("a", "m", servers=(ServerRef("bad"),))
    with trio.fail_after(60):
        async with hostile_server(transport) as where:
            # A call that waited for its answer would wait an hour: the guard above would fail the test first.
            spec = ServerSpec("bad", where, protocol="legacy", timeout=3600)
            config = Config(servers={"bad": spec}, assistants={"a": assistant})
            async with open_runtime(config, models={"m": batch_model()}) as rt:
                first = await rt.run("a", "everything", thread_id="t")
                later = await rt.run("a", "again", thread_id="t")
    check_stream(first.events)
    assert first.outcome is later.outcome is Outcome.ANSWERED
    results = {r.call_id: r for r in first.tool_results}
    for name in BAD:
        failed = results[f"c_{name}"]
        assert failed.kind is ErrorKind.TOOL_ERROR, failed
        assert (failed.error or "").startswith("malformed answer from the server"), failed.error
    assert [results[f"c_echo{i}"].result for i in (1, 2)] == [{"said": "hi 1"}, {"said": "hi 2"}]
    assert [r.result for r in later.tool_results] == [{"said": "later"}]
    # Said in the log, a line each, never a traceback.
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [r for r in warnings if r.exc_info or "\n" in r.getMessage()]
    assert len([r for r in warnings if "'bad'" in r.getMessage()]) >= len(BAD)
