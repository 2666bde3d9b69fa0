"""The run as one value: a RunRequest built once at the edge (a websocket frame, an AG-UI input, an embedder) and
passed whole, and the convenient call forms that build it."""

from __future__ import annotations

import json

import attrs
import pytest
import trio

from tests.test_runtime_runs import demo_config
from yao_actors import RunRequest
from yao_actors.conversation.request import as_request
from yao_actors.events import Outcome
from yao_actors.runtime import open_runtime
from yao_actors.service.agui_input import parse_run_input
from yao_actors.service.protocol import USER_ROLES, RunFrame, parse_frame


def test_a_request_decides_its_ids_when_built_and_copies_its_input() -> None:
    given = [{"role": "user", "content": "hi"}]
    request = RunRequest("default", given)
    assert request.thread_id
    assert request.run_id
    assert request.thread_id != request.run_id
    given[0]["content"] = "changed"
    assert request.messages == ({"role": "user", "content": "hi"},)
    assert RunRequest("default", "hi", thread_id="t1", run_id="r1").messages == ({"role": "user", "content": "hi"},)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        request.thread_id = "other"  # type: ignore[misc]


def test_the_convenient_form_builds_the_same_request_and_refuses_a_mix() -> None:
    built = as_request("default", "hi", {"thread_id": "t1", "run_id": "r1", "principal": "alice"})
    assert built == RunRequest("default", "hi", thread_id="t1", run_id="r1", principal="alice")
    assert as_request(built, None, {}) is built
    with pytest.raises(TypeError, match="RunRequest alone"):
        as_request(built, "hi", {})
    with pytest.raises(TypeError, match="RunRequest alone"):
        as_request(built, None, {"thread_id": "t2"})
    with pytest.raises(TypeError, match="needs its messages"):
        as_request("default", None, {})


def test_a_websocket_frame_becomes_its_request_for_the_connections_principal() -> None:
    raw = {
        "type": "run",
        "runId": "r1",
        "threadId": "t1",
        "messages": [{"role": "user", "content": "hi"}],
        "resume": [{"interruptId": "i1", "status": "resolved"}],
    }
    frame = parse_frame(json.dumps(raw), max_bytes=10_000, client_roles=USER_ROLES)
    assert isinstance(frame, RunFrame)
    request = frame.to_request("alice")
    assert (request.run_id, request.thread_id, request.principal) == ("r1", "t1", "alice")
    assert request.messages == ({"role": "user", "content": "hi"},)
    assert request.history is None
    assert [dict(entry) for entry in request.resume] == [{"interruptId": "i1", "status": "resolved"}]


def test_an_agui_input_becomes_its_request_with_the_conversation_as_history() -> None:
    body = {
        "threadId": "t1",
        "runId": "r1",
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [
            {"id": "1", "role": "user", "content": "first"},
            {"id": "2", "role": "assistant", "content": "answer"},
            {"id": "3", "role": "user", "content": "second"},
        ],
    }
    run = parse_run_input(json.dumps(body).encode(), assistant="default", client_roles=USER_ROLES)
    request = run.to_request(None)
    assert (request.assistant, request.run_id, request.thread_id, request.principal) == ("default", "r1", "t1", None)
    assert request.history == ({"role": "user", "content": "first"}, {"role": "assistant", "content": "answer"})
    assert request.messages == ({"role": "user", "content": "second"},)


async def test_a_request_runs_as_its_convenient_form_does() -> None:
    with trio.fail_after(30):
        async with open_runtime(demo_config()) as runtime:
            request = RunRequest("default", "北京今天适合穿什么?", thread_id="t1", run_id="r1")
            result = await runtime.run(request)
            async with runtime.open_run(RunRequest("default", "上海呢?", thread_id="t1")) as stream:
                events = [event async for event in stream]
            again = await runtime.run("default", "北京今天适合穿什么?", thread_id="t2")
    assert (result.run_id, result.thread_id, result.outcome) == ("r1", "t1", Outcome.ANSWERED)
    assert events[0]["type"] == "RUN_STARTED"
    assert events[0]["threadId"] == "t1"
    assert stream.result is not None
    assert stream.result.thread_id == "t1"
    assert again.text == result.text
