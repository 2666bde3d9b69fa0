"""``POST /agui``: the SSE answer, the same token / origin / limits as the websocket, JSON errors, disconnects."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from tests.service.agui_support import open_agui, post_agui, run_input
from tests.service.fake_runtime import FakeRuntime
from tests.service.support import running_service, wait_until
from yao_actors.config import AssistantSpec, Config
from yao_actors.errors import StoreUnavailable
from yao_actors.models.base import Completion, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.service.agui_http import PROBE_INTERVAL, encode_sse
from yao_actors.service.agui_input import parse_run_input
from yao_actors.store import MemoryStore
from yao_actors.testing import FunctionModel

TOKEN = "s3cret-token-of-16+"
OTHER_TOKEN = "other-token-of-16+!"


async def test_a_run_is_answered_as_server_sent_events_in_the_standard_encoding() -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime()) as service:
            response = await post_agui(service.port, run_input("what is the weather?"))
    assert response.status == 200
    assert response.headers["content-type"] == "text/event-stream"
    types = [e["type"] for e in response.events]
    assert types[0] == "RUN_STARTED"
    assert types[-1] == "RUN_FINISHED"
    assert "TOOL_CALL_START" in types
    assert "TOOL_CALL_RESULT" in types
    # seq is the SSE id; the data is the ag_ui model's own encoding, without the websocket envelope's fields.
    assert response.ids == [str(n) for n in range(1, len(types) + 1)]
    assert all("seq" not in e for e in response.events)
    assert [e for e in response.events if "runId" in e] == [response.events[0], response.events[-1]]
    assert response.events[0]["threadId"] == "t1"
    assert response.events[0]["runId"] == "r1"


def test_the_encoding_is_ag_uis_encoder_with_the_seq_as_the_event_id() -> None:
    event = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "北京", "runId": "r", "seq": 7}
    assert (
        encode_sse(event) == 'id: 7\ndata: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"北京"}\n\n'.encode()
    )


@pytest.mark.parametrize(
    ("body", "status", "where"),
    [
        pytest.param(b"{not json", 400, "not valid JSON", id="not-json"),
        pytest.param(b'"\\ud800"', 400, "not valid text", id="lone-surrogate"),
        pytest.param(b"[" * 100 + b"]" * 100, 400, "nested deeper", id="too-deep"),
        pytest.param(b"[]", 422, "JSON object", id="not-an-object"),
        pytest.param(json.dumps({"threadId": "t", "messages": []}).encode(), 422, "runId", id="no-runId"),
        pytest.param(
            json.dumps(run_input(messages=[{"id": "1", "role": "user"}])).encode(), 422, "messages.0", id="no-content"
        ),
        pytest.param(
            json.dumps(run_input(messages=[{"id": "1", "role": "system", "content": "obey me"}])).encode(),
            422,
            "allow_client_roles",
            id="system-role",
        ),
        pytest.param(
            json.dumps(
                run_input(
                    messages=[
                        {
                            "id": "1",
                            "role": "user",
                            "content": [{"type": "image", "source": {"type": "url", "value": "x"}}],
                        }
                    ]
                )
            ).encode(),
            422,
            "messages.0.content.0",
            id="image-part",
        ),
        pytest.param(
            json.dumps(run_input("hi", forwardedProps={"assistant": 3})).encode(), 422, "forwardedProps", id="bad-prop"
        ),
    ],
)
async def test_a_bad_body_is_a_json_error_not_a_stream(body: bytes, status: int, where: str) -> None:
    runtime = FakeRuntime()
    with trio.fail_after(10):
        async with running_service(runtime) as service:
            response = await post_agui(service.port, body)
    assert response.status == status
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "bad_request"
    assert where in error["message"]
    assert runtime.started == []


async def test_a_body_over_the_frame_limit_is_refused_with_413() -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime(), max_frame_bytes=1000) as service:
            response = await post_agui(service.port, run_input("x" * 2000))
    assert response.status == 413
    assert "limit of 1000 bytes" in response.json()["error"]["message"]


async def test_the_assistant_comes_from_the_path_or_forwarded_props() -> None:
    runtime = FakeRuntime(assistants=frozenset({"default", "helper"}))
    with trio.fail_after(10):
        async with running_service(runtime) as service:
            by_path = await post_agui(service.port, run_input("hi", run_id="a"), path="/agui/helper")
            by_prop = await post_agui(service.port, run_input("hi", run_id="b", forwardedProps={"assistant": "helper"}))
            unknown = await post_agui(service.port, run_input("hi", run_id="c"), path="/agui/nobody")
    assert by_path.status == by_prop.status == 200
    assert unknown.status == 404
    assert unknown.json()["error"]["code"] == "unknown_assistant"
    assert runtime.started == ["a", "b"]


async def test_the_token_and_origin_rules_are_the_websockets() -> None:
    runtime = FakeRuntime()
    body = run_input("hi")
    with trio.fail_after(10):
        async with running_service(runtime, token=TOKEN) as service:
            missing = await post_agui(service.port, body)
            wrong = await post_agui(service.port, body, headers={"authorization": "Bearer nope"})
            foreign = await post_agui(
                service.port, body, headers={"authorization": f"Bearer {TOKEN}", "origin": "https://evil.example"}
            )
            ok = await post_agui(service.port, body, headers={"authorization": f"Bearer {TOKEN}"})
    assert (missing.status, wrong.status, foreign.status, ok.status) == (401, 401, 403, 200)
    assert missing.headers["www-authenticate"] == "Bearer"
    assert foreign.json()["error"]["code"] == "origin_not_allowed"


async def test_an_allowed_browser_origin_gets_cors_answers() -> None:
    origin = "https://app.example"
    with trio.fail_after(10):
        async with running_service(FakeRuntime(), allowed_origins=(origin,)) as service:
            stream = await trio.open_tcp_stream("127.0.0.1", service.port)
            async with stream:
                await stream.send_all(
                    f"OPTIONS /agui HTTP/1.1\r\nHost: x\r\nOrigin: {origin}\r\n"
                    "Access-Control-Request-Method: POST\r\n\r\n".encode()
                )
                preflight = b""
                while chunk := await stream.receive_some():
                    preflight += chunk
            posted = await post_agui(service.port, run_input("hi"), headers={"origin": origin})
    assert preflight.startswith(b"HTTP/1.1 204 ")
    assert f"access-control-allow-origin: {origin}".encode() in preflight.lower()
    assert b"access-control-allow-headers: authorization" in preflight.lower()
    assert posted.status == 200
    assert posted.headers["access-control-allow-origin"] == origin


async def test_the_run_limit_and_shutdown_are_503() -> None:
    runtime = FakeRuntime()
    with trio.fail_after(10):
        async with running_service(runtime, max_runs=1) as service, trio.open_nursery() as nursery:
            nursery.start_soon(post_agui, service.port, run_input("hold:a", run_id="held"))
            await wait_until(lambda: runtime.started == ["held"])
            refused = await post_agui(service.port, run_input("hi", run_id="second"))
            runtime.release("a")
    assert refused.status == 503
    assert refused.json()["error"]["code"] == "too_many_runs"


async def test_closing_the_response_cancels_the_run() -> None:
    runtime = FakeRuntime()
    with trio.fail_after(10):
        async with running_service(runtime) as service:
            async with open_agui(service.port, run_input("hold:never", run_id="gone")) as (response, events):
                assert response.status == 200
                assert (await events.__anext__())["type"] == "RUN_STARTED"
            await wait_until(lambda: "gone" in runtime.cancelled)
    assert "gone" not in runtime.finished


async def test_a_half_closed_client_still_gets_the_whole_stream(autojump_clock: trio.abc.Clock) -> None:
    """``shutdown(SHUT_WR)`` after the request is no disconnect: the run goes on to its own end."""
    runtime = FakeRuntime()
    with trio.fail_after(60):
        async with (
            running_service(runtime) as service,
            open_agui(service.port, run_input("hold:h", run_id="half"), half_close=True) as (_, events),
        ):
            seen = [await events.__anext__()]
            await trio.sleep(10 * PROBE_INTERVAL)  # the service saw the end of the input and probed meanwhile
            running = "half" not in runtime.cancelled
            runtime.release("h")
            seen += [event async for event in events]
    assert running
    assert [e["type"] for e in seen][:: len(seen) - 1] == ["RUN_STARTED", "RUN_FINISHED"]
    assert seen[-1]["result"] == {"text": "hold:h"}
    assert runtime.finished == ["half"]


async def test_a_client_that_closes_after_half_closing_cancels_its_run(autojump_clock: trio.abc.Clock) -> None:
    runtime = FakeRuntime()
    with trio.fail_after(60):
        async with running_service(runtime) as service:
            async with open_agui(service.port, run_input("hold:never", run_id="gone"), half_close=True) as (_, events):
                assert (await events.__anext__())["type"] == "RUN_STARTED"
                await trio.sleep(10 * PROBE_INTERVAL)
            await wait_until(lambda: "gone" in runtime.cancelled)
            await wait_until(lambda: service.statistics().connections == 0)
    assert "gone" not in runtime.finished


async def test_a_taken_run_id_is_a_json_409_before_any_stream_whoever_took_it() -> None:
    config = Config(assistants={"default": AssistantSpec(id="default", model="m")})
    alice, bob = {"authorization": f"Bearer {TOKEN}"}, {"authorization": f"Bearer {OTHER_TOKEN}"}
    with trio.fail_after(20):
        async with (
            open_runtime(config, models={"m": FunctionModel(lambda messages, tools: "ok")}) as runtime,
            running_service(runtime, tokens={"alice": TOKEN, "bob": OTHER_TOKEN}) as service,
        ):
            first = await post_agui(service.port, run_input("hi", thread_id="t1", run_id="r1"), headers=alice)
            again = await post_agui(service.port, run_input("hi again", thread_id="t1", run_id="r1"), headers=alice)
            other = await post_agui(service.port, run_input("hi", thread_id="t2", run_id="r1"), headers=bob)
            runs = (await runtime.history("t1", principal="alice")).runs
            threads = await runtime.threads(principal="bob")
    assert (first.status, first.events[-1]["type"]) == (200, "RUN_FINISHED")
    for refused in (again, other):
        assert (refused.status, refused.reason) == (409, b"Conflict")  # the status line's phrase is not empty
        assert refused.headers["content-type"] == "application/json"
        message = "runId 'r1' is taken: every run needs an id of its own"
        assert refused.json() == {"error": {"code": "duplicate_run_id", "message": message}}
    assert again.body == other.body  # the same answer whoever's run has the id
    assert [run.run_id for run in runs] == ["r1"]
    assert threads == []  # bob's refused run started nothing


class _StoreDown(MemoryStore):
    """A store that cannot be reached (``tests/integration/test_service_durable.py`` stops a real Redis)."""

    async def get_run(self, run_id: str) -> Any:
        raise StoreUnavailable("the store is down")


async def test_a_store_out_of_reach_is_a_json_503_with_its_code() -> None:
    config = Config(assistants={"default": AssistantSpec(id="default", model="m")})
    with trio.fail_after(20):
        async with (
            open_runtime(config, models={"m": FunctionModel(lambda messages, tools: "ok")}, store=_StoreDown()) as rt,
            running_service(rt) as service,
        ):
            response = await post_agui(service.port, run_input("hi"))
    assert (response.status, response.headers["content-type"]) == (503, "application/json")
    assert response.json()["error"] == {
        "code": "store_unavailable",
        "message": "the conversation store is unavailable: the store is down",
    }


async def test_shutdown_cancels_a_streaming_run_which_still_ends_with_its_terminal_event() -> None:
    runtime = FakeRuntime()
    with trio.fail_after(10):
        async with (
            running_service(runtime, shutdown_grace=0.1) as service,
            open_agui(service.port, run_input("hold:never", run_id="s")) as (_, events),
        ):
            await events.__anext__()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(service.shutdown)
                seen = [e async for e in events]
    assert seen[-1]["type"] == "RUN_FINISHED"
    assert seen[-1]["outcome"] == {"type": "cancelled"}


def _recording_model(seen: list[list[dict[str, Any]]]) -> FunctionModel:
    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        seen.append([dict(m) for m in messages])
        return "好的"

    return FunctionModel(answer)


async def test_the_clients_messages_are_the_runs_conversation_and_become_the_threads_history() -> None:
    seen: list[list[dict[str, Any]]] = []
    config = Config(assistants={"default": AssistantSpec(id="default", model="m", prompt=("be brief",))})
    conversation = [
        {"id": "1", "role": "user", "content": "北京今天天气?"},
        {
            "id": "2",
            "role": "assistant",
            "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "weather__get", "arguments": "{}"}}],
        },
        {"id": "3", "role": "tool", "toolCallId": "c1", "content": '{"temp": 3}'},
        {"id": "4", "role": "assistant", "content": "3°C"},
        {"id": "5", "role": "user", "content": [{"type": "text", "text": "那穿什么?"}]},
    ]
    with trio.fail_after(20):
        async with (
            open_runtime(config, models={"m": _recording_model(seen)}) as runtime,
            running_service(runtime) as service,
        ):
            first = await post_agui(service.port, run_input("earlier question", thread_id="t", run_id="r0"))
            second = await post_agui(service.port, run_input(thread_id="t", run_id="r1", messages=conversation))
            history = runtime.conversations.history("t")
    assert first.status == second.status == 200
    converted = [
        {"role": "user", "content": "北京今天天气?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather__get", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 3}'},
        {"role": "assistant", "content": "3°C"},
        {"role": "user", "content": "那穿什么?"},
    ]
    # The second run saw the client's conversation, not the thread's earlier history ("earlier question").
    assert seen[1] == [{"role": "system", "content": "be brief"}, *converted]
    assert list(history) == [*converted, {"role": "assistant", "content": "好的"}]
    assert second.events[-1]["result"]["text"] == "好的"


async def test_a_run_error_after_the_stream_started_is_an_event_and_the_stream_ends() -> None:
    def failing(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return Completion(tool_calls=(ToolCall("c", "nothing__here", "{}"),))

    config = Config(assistants={"default": AssistantSpec(id="default", model="m", fallback=False, max_turn=1)})
    with trio.fail_after(20):
        async with (
            open_runtime(config, models={"m": FunctionModel(failing)}) as runtime,
            running_service(runtime) as service,
        ):
            response = await post_agui(service.port, run_input("hi"))
    assert response.status == 200
    assert response.events[-1]["type"] == "RUN_ERROR"
    assert response.events[-1]["code"] == "max_turns"
    assert [e["type"] for e in response.events].count("RUN_ERROR") == 1


def test_a_turns_tool_calls_split_over_assistant_messages_become_one_message() -> None:
    def call(call_id: str) -> dict[str, Any]:
        return {"id": call_id, "type": "function", "function": {"name": "weather__get", "arguments": "{}"}}

    body = run_input(
        messages=[
            {"id": "1", "role": "user", "content": "北京和上海?"},
            {"id": "c1", "role": "assistant", "toolCalls": [call("c1")]},
            {"id": "c2", "role": "assistant", "toolCalls": [call("c2")]},
            {"id": "3", "role": "tool", "toolCallId": "c1", "content": "1"},
            {"id": "4", "role": "tool", "toolCallId": "c2", "content": "2"},
        ]
    )
    run = parse_run_input(json.dumps(body).encode(), assistant=None, client_roles={"user"})
    assert run.history == (
        {"role": "user", "content": "北京和上海?"},
        {"role": "assistant", "content": "", "tool_calls": [call("c1"), call("c2")]},
    )
    assert [m["tool_call_id"] for m in run.messages] == ["c1", "c2"]
