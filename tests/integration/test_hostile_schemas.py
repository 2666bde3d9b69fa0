"""A hostile MCP server's schemas, over stdio and streamable HTTP, against a real service: no ``$ref`` is ever
fetched (a loopback server that records fetches sees none, one that never answers freezes nothing), no local
file is read, catastrophic patterns are checked at once, questions that are not flat are declined with the
reason, answers with object values are refused and defaults are filled in — and ``/healthz`` answers within
a second all along."""

from __future__ import annotations

import http.server
import json
import logging
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from tests.integration.processes import listening_process
from tests.service.support import http_request, running_service
from tests.support import check_stream
from yao_actors import AssistantSpec, Completion, Config, FunctionModel, Outcome, ServerRef, ToolCall, open_runtime
from yao_actors.config import HttpTransport, InMemoryTransport, ServerSpec, StdioTransport
from yao_actors.errors import RunErrorCode
from yao_actors.runtime import Runtime
from yao_actors.testing.hostile_schemas import build_hostile_server
from yao_actors.tools.input_requests import InputAnswer, InputRequest

pytestmark = pytest.mark.filterwarnings(r"ignore:Async generator '(httpx2|httpcore2)\.:ResourceWarning")

#: What the loopback server answers a fetch with, and what the local file holds: neither may reach anyone.
SECRET = "INTERNAL-SECRET-42"
FILE_SECRET = "FILE-SECRET-7"
#: Long enough that Python's backtracking ``re`` takes seconds on ``^(a+)+$`` (doubling per character).
SLOW = "a" * 27 + "!"


@attrs.define
class Recorder:
    """A loopback HTTP server, in a thread of its own (a client that blocks the event loop on it cannot block
    it), that records every request made to it."""

    url: str = ""
    fetches: list[str] = attrs.field(factory=list)


def _handler(recorder: Recorder, answers: bool) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            recorder.fetches.append(self.path)
            if not answers:
                # Never answers; the connection is dropped after a while only so that a client that blocks on it
                # (the defect) lets the test fail instead of hanging it.
                time.sleep(10)
                return
            body = json.dumps({"const": SECRET}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def recorder_server(*, answers: bool) -> Iterator[Recorder]:
    recorder = Recorder()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(recorder, answers))
    server.daemon_threads = True
    recorder.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield recorder
    finally:
        server.shutdown()
        server.server_close()


@attrs.frozen
class Hostile:
    transport: StdioTransport | HttpTransport
    refs: Recorder
    silent: Recorder


@asynccontextmanager
async def hostile_server(transport: str, tmp_path: Path) -> AsyncIterator[Hostile]:
    """The hostile server (:mod:`yao_actors.testing.hostile_schemas`) in its own process, its ``$ref``\\ s
    naming a recording loopback server, a silent one, and a local JSON file holding a secret."""
    secret_file = tmp_path / "secret.json"
    secret_file.write_text(json.dumps({"const": FILE_SECRET}), encoding="utf-8")
    with recorder_server(answers=True) as refs, recorder_server(answers=False) as silent:
        args = ("-m", "yao_actors.testing.hostile_schemas", "--refs", refs.url, "--silent", silent.url)
        args += ("--file", str(secret_file))
        if transport == "stdio":
            yield Hostile(StdioTransport(sys.executable, args), refs, silent)
            return
        async with listening_process([sys.executable, *args, "--http"]) as (url, _):
            yield Hostile(HttpTransport(url), refs, silent)


@asynccontextmanager
async def healthz_answering(runtime: Runtime) -> AsyncIterator[None]:
    """A real service on ``runtime``, whose ``/healthz`` is asked again and again while the block runs, and
    once more after it: each answer must come within a second (a hang guard: a frozen event loop fails the
    test with ``TooSlowError``)."""
    block_done, last_poll_done = trio.Event(), trio.Event()
    async with running_service(runtime) as service, trio.open_nursery() as nursery:

        async def poll() -> None:
            while True:
                ending = block_done.is_set()
                with trio.fail_after(1):
                    assert (await http_request(service.port, "/healthz")).status == 200
                if ending:
                    last_poll_done.set()
                    return
                await trio.sleep(0.05)  # pacing between polls, not a wait for something

        nursery.start_soon(poll)
        yield
        block_done.set()
        await last_poll_done.wait()


def model() -> FunctionModel:
    """Calls what the user message says (a JSON list of ``[tool, arguments]``), then answers with the tool
    messages it got (also when asked to fix calls that failed)."""

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion | str:
        if messages[-1]["role"] == "tool" or not str(messages[-1]["content"]).startswith("[["):  # or told to retry
            return "\n".join(m["content"] for m in messages if m["role"] == "tool")
        wanted = json.loads(messages[-1]["content"])
        calls = [ToolCall(f"c_{tool}", f"hostile__{tool}", json.dumps(arguments)) for tool, arguments in wanted]
        return Completion(tool_calls=tuple(calls))

    return FunctionModel(script)


def config(transport: Any, protocol: str = "auto") -> Config:
    spec = ServerSpec("hostile", transport, protocol=protocol)
    assistant = AssistantSpec("a", "m", servers=(ServerRef("hostile"),))
    return Config(servers={"hostile": spec}, assistants={"a": assistant})


def results(events: list[dict[str, Any]]) -> dict[str, str]:
    return {e["toolCallId"].removeprefix("c_"): e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"}


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_hostile_tool_schemas_fetch_nothing_read_nothing_and_freeze_nothing(
    transport: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="yao_actors.tools.server_catalog")
    calls = [
        ["remote_ref", {"value": "x"}],
        ["file_ref", {"value": "x"}],
        ["slow_pattern", {"value": SLOW}],
        ["backreference", {"value": "zz"}],
        ["slow_output", {"n": len(SLOW) - 1}],
    ]
    with trio.fail_after(60):
        async with (
            hostile_server(transport, tmp_path) as hostile,
            open_runtime(config(hostile.transport), models={"m": model()}) as rt,
            healthz_answering(rt),
        ):
            run = await rt.run("a", json.dumps(calls))
            silent = await rt.run("a", json.dumps([["silent_ref", {"value": "x"}]]))  # alone: nothing else fails it
    check_stream(run.events)
    check_stream(silent.events)
    assert (hostile.refs.fetches, hostile.silent.fetches) == ([], [])
    assert run.outcome is silent.outcome is Outcome.ANSWERED
    everything = json.dumps(run.events)
    assert SECRET not in everything
    assert FILE_SECRET not in everything
    got = results(run.events) | results(silent.events)
    # A schema that refers outside itself is not enforced: the server judges the call (and answers it).
    for tool in ("remote_ref", "silent_ref", "file_ref"):
        assert json.loads(got[tool]) == {"echo": "x"}
    assert got["slow_pattern"] == f"Error: invalid arguments: value: {SLOW!r} does not match '^(a+)+$'"
    assert got["slow_output"].startswith("Error: the tool's structuredContent does not match its outputSchema")
    assert json.loads(got["backreference"]) == {"echo": "zz"}  # a pattern RE2 refuses is not enforced
    (status,) = [e["value"] for e in run.events if e.get("name") == "server_status"]  # said in every run
    assert (status["server"], status["state"]) == ("hostile", "schema_not_enforced")
    for tool in ("remote_ref", "silent_ref", "file_ref", "backreference"):
        assert f"tool {tool!r}: inputSchema" in status["detail"]
    assert "$ref 'file://" in status["detail"]
    assert "pattern '(a)\\\\1' is not enforced" in status["detail"]
    logged = [r.getMessage() for r in caplog.records if "inputSchema" in r.getMessage()]
    assert sorted(line.split(":")[1].strip() for line in logged) == [
        "tool 'backreference'",
        "tool 'file_ref'",
        "tool 'remote_ref'",
        "tool 'silent_ref'",
    ]  # one line per tool


def resolved(interrupt: dict[str, Any], content: Any) -> list[dict[str, Any]]:
    return [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"action": "accept", "content": content}}]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_hostile_questions_are_declined_or_checked_at_once(transport: str, tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with (
            hostile_server(transport, tmp_path) as hostile,
            open_runtime(config(hostile.transport, "legacy"), models={"m": model()}) as rt,
            healthz_answering(rt),
        ):
            nested = await rt.run("a", json.dumps([["nested_question", {}]]))
            remote = await rt.run("a", json.dumps([["ref_question", {}]]))
            asked = await rt.run("a", json.dumps([["default_question", {}]]), thread_id="d")
            (size,) = asked.events[-1]["outcome"]["interrupts"]
            defaulted = await rt.run("a", [], thread_id="d", resume=resolved(size, {"name": "Ann"}))
            slow = await rt.run("a", json.dumps([["slow_question", {}]]), thread_id="s")
            (word,) = slow.events[-1]["outcome"]["interrupts"]
            too_slow = await rt.run("a", [], thread_id="s", resume=resolved(word, {"word": SLOW}))
            an_object = await rt.run("a", [], thread_id="s", resume=resolved(word, {"word": {"a": "aa"}}))
            answered = await rt.run("a", [], thread_id="s", resume=resolved(word, {"word": "aaa"}))
    for run in (nested, remote, asked, defaulted, slow, too_slow, an_object, answered):
        check_stream(run.events)
    # Questions that are not flat are declined, and the tool (so the model) hears why.
    assert nested.outcome is Outcome.ANSWERED
    declined = json.loads(results(nested.events)["nested_question"])["error"]
    assert declined.startswith("the client declines the question: field 'address':")
    declined = json.loads(results(remote.events)["ref_question"])["error"]
    assert declined.startswith("the client declines the question: field 'name': '$ref' is not allowed")
    assert hostile.refs.fetches == []
    # An answer leaving out a field with a default is sent with the default.
    assert json.loads(results(defaulted.events)["default_question"]) == {
        "action": "accept",
        "content": {"name": "Ann", "size": "M"},
    }
    # A catastrophic pattern is checked at once, an object value is refused, and the question stays open.
    assert (too_slow.outcome, too_slow.code) == (Outcome.ERROR, RunErrorCode.INVALID_RESUME)
    assert too_slow.error == f"resume[0].payload.content.word: {SLOW!r} does not match '^(a+)+$'"
    assert (an_object.outcome, an_object.code) == (Outcome.ERROR, RunErrorCode.INVALID_RESUME)
    assert (an_object.error or "").startswith("resume[0].payload.content.word: an answer's fields are strings")
    assert json.loads(results(answered.events)["slow_question"]) == {"action": "accept", "content": {"word": "aaa"}}


async def test_an_input_handlers_answer_gets_the_defaults_too(tmp_path: Path) -> None:
    asked: list[InputRequest] = []

    async def handler(request: InputRequest) -> InputAnswer:
        asked.append(request)
        return InputAnswer("accept", {"name": "Ann"})

    server = build_hostile_server(refs="http://127.0.0.1:9", silent="http://127.0.0.1:9", file=str(tmp_path / "x"))
    transport = InMemoryTransport(server)
    with trio.fail_after(30):
        async with open_runtime(config(transport, "legacy"), models={"m": model()}, input_handler=handler) as rt:
            outcome = await rt.servers["hostile"].call_tool("default_question", {})
    assert [request.schema["required"] for request in asked if request.schema] == [["name"]]
    assert outcome.result == {"action": "accept", "content": {"name": "Ann", "size": "M"}}
