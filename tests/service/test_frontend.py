"""The websocket front end over real loopback sockets, with a fake runtime behind it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, wrap_client_stream
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Request, TextMessage

from tests.service.fake_runtime import FakeRuntime
from tests.service.support import (
    handshake_status,
    receive,
    run_frame,
    running_service,
    send,
    until_all_terminal,
    until_terminal,
    wait_until,
)
from yao_actors.cli.chat import open_service_connection
from yao_actors.config import ServiceSpec
from yao_actors.service import Service, ServiceStatistics, serve_service


async def test_a_run_streams_its_events_in_order_and_ends_once() -> None:
    runtime = FakeRuntime()
    with trio.fail_after(10):
        async with running_service(runtime) as service, open_service_connection(service.url) as ws:
            await send(ws, run_frame("what is the weather", run_id="r1", thread_id="t1"))
            events = await until_terminal(ws, "r1")
    types = [e["type"] for e in events]
    assert types[0] == "RUN_STARTED"
    assert types[-1] == "RUN_FINISHED"
    assert [e for e in types if e in ("RUN_FINISHED", "RUN_ERROR")] == ["RUN_FINISHED"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert "TOOL_CALL_START" in types
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "echo: what is the weather"
    assert runtime.thread_ids == ["t1"]


async def test_two_threads_on_one_connection_interleave() -> None:
    runtime = FakeRuntime()
    with trio.fail_after(10):
        async with running_service(runtime) as service, open_service_connection(service.url) as ws:
            await send(ws, run_frame("hold:a", run_id="ra", thread_id="ta"))
            await send(ws, run_frame("hold:b", run_id="rb", thread_id="tb"))
            started = {(await receive(ws))["runId"] for _ in range(2)}
            assert started == {"ra", "rb"}
            runtime.release("b")
            b_events = await until_terminal(ws, "rb")
            assert runtime.finished == ["rb"]
            runtime.release("a")
            a_events = await until_terminal(ws, "ra")
    assert b_events[-1]["type"] == a_events[-1]["type"] == "RUN_FINISHED"
    assert runtime.thread_ids == ["ta", "tb"]


async def test_cancel_stops_a_run_with_one_terminal_event() -> None:
    runtime = FakeRuntime()
    with trio.fail_after(10):
        async with holding(runtime, "never") as (_, ws):
            await send(ws, {"type": "cancel", "runId": "r1"})
            events = await until_terminal(ws, "r1")
            await send(ws, {"type": "ping"})
            after = await receive(ws)
    assert [e["type"] for e in events] == ["RUN_FINISHED"]
    assert events[0]["outcome"] == {"type": "cancelled"}
    assert events[0]["seq"] == 2
    assert runtime.cancelled == ["r1"]
    assert after == {"type": "pong"}


async def test_cancel_of_an_unknown_run_is_answered_unknown_run() -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime()) as service, open_service_connection(service.url) as ws:
            await send(ws, {"type": "cancel", "runId": "nobody"})
            error = await receive(ws)
            await send(ws, {"type": "ping"})
            assert await receive(ws) == {"type": "pong"}
    assert (error["type"], error["code"], error["runId"]) == ("error", "unknown_run", "nobody")
    assert "nobody" in error["message"]


MALFORMED: list[tuple[str, str | bytes, str]] = [
    ("not json", "this is not json", "bad_request"),
    ("not an object", "[1, 2]", "bad_request"),
    ("unknown type", json.dumps({"type": "dance"}), "bad_request"),
    ("no type", json.dumps({"runId": "x"}), "bad_request"),
    ("run without messages", json.dumps({"type": "run", "runId": "x"}), "bad_request"),
    ("messages not a list", json.dumps({"type": "run", "messages": "hello"}), "bad_request"),
    ("empty messages", json.dumps({"type": "run", "messages": []}), "bad_request"),
    ("bad role", json.dumps({"type": "run", "messages": [{"role": "robot", "content": "x"}]}), "bad_request"),
    ("content not a string", json.dumps({"type": "run", "messages": [{"role": "user", "content": 5}]}), "bad_request"),
    ("runId not a string", json.dumps({"type": "cancel", "runId": 7}), "bad_request"),
    ("cancel without runId", json.dumps({"type": "cancel"}), "bad_request"),
    ("unknown field", json.dumps({"type": "ping", "extra": 1}), "bad_request"),
    (
        "a client tool without a description",
        json.dumps(run_frame("x", run_id="x", tools=[{"name": "rm"}])),
        "bad_request",
    ),
    ("binary frame", b'{"type": "ping"}', "bad_request"),
    ("huge frame", json.dumps(run_frame("x" * 5000, run_id="x")), "frame_too_large"),
    ("unknown assistant", json.dumps(run_frame("hi", run_id="x", assistant="nobody")), "unknown_assistant"),
]


@pytest.mark.parametrize(("frame", "code"), [pytest.param(f, c, id=name) for name, f, c in MALFORMED])
async def test_a_malformed_frame_gets_its_code_and_the_connection_goes_on(frame: str | bytes, code: str) -> None:
    with trio.fail_after(10):
        async with (
            running_service(FakeRuntime(), max_frame_bytes=4096) as service,
            open_service_connection(service.url) as ws,
        ):
            await ws.send_message(frame)
            error = await receive(ws)
            await send(ws, run_frame("still here", run_id="ok"))
            events = await until_terminal(ws, "ok")
    assert error["type"] == "RUN_ERROR"
    assert error["code"] == code
    assert error["message"]
    assert events[-1]["type"] == "RUN_FINISHED"


async def test_a_bad_request_names_the_field() -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime()) as service, open_service_connection(service.url) as ws:
            await send(ws, {"type": "run", "runId": "r9", "messages": [{"role": "robot", "content": "x"}]})
            error = await receive(ws)
    assert error["message"].startswith("messages[0].role:")
    assert error["runId"] == "r9"


async def test_a_frame_far_beyond_the_limit_closes_the_connection() -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime(), max_frame_bytes=1024) as service:
            async with open_service_connection(service.url) as ws:
                await ws.send_message("x" * 1024 * 10)
                with pytest.raises(ConnectionClosed) as closed:
                    await ws.get_message()
            assert closed.value.reason.code == 1009
            assert "maximum message size" in closed.value.reason.reason


async def test_a_duplicate_run_id_gets_a_non_terminal_error_and_the_run_keeps_one_terminal_event() -> None:
    runtime = FakeRuntime()
    with trio.fail_after(10):
        async with holding(runtime, "x", run_id="same") as (_, ws):
            await send(ws, run_frame("again", run_id="same"))
            error = await receive(ws)
            runtime.release("x")
            events = await until_terminal(ws, "same")
            await send(ws, {"type": "ping"})
            assert await receive(ws) == {"type": "pong"}  # nothing else came for "same"
    assert (error["type"], error["code"], error["runId"]) == ("error", "duplicate_run_id", "same")
    assert [e["type"] for e in events if e["type"] in ("RUN_FINISHED", "RUN_ERROR")] == ["RUN_FINISHED"]
    assert runtime.started == ["same"]


async def test_too_many_runs_on_one_connection() -> None:
    runtime = FakeRuntime()
    with trio.fail_after(10):
        async with (
            running_service(runtime, max_runs_per_connection=2) as service,
            open_service_connection(service.url) as ws,
        ):
            for n in range(3):
                await send(ws, run_frame("hold:x", run_id=f"r{n}", thread_id=f"t{n}"))
            frames = [await receive(ws) for _ in range(3)]
            runtime.release("x")
            ended = await until_all_terminal(ws, {"r0", "r1"})
    refused = [f for f in frames if f["type"] == "RUN_ERROR"]
    assert [(f["runId"], f["code"]) for f in refused] == [("r2", "too_many_runs")]
    assert runtime.started == ["r0", "r1"]
    assert all(events[-1]["type"] == "RUN_FINISHED" for events in ended.values())


async def test_too_many_runs_in_the_whole_service() -> None:
    runtime = FakeRuntime()
    with trio.fail_after(10):
        async with (
            holding(runtime, "x", max_runs=1) as (service, first),
            open_service_connection(service.url) as second,
        ):
            await send(second, run_frame("hi", run_id="r2"))
            refused = await receive(second)
            runtime.release("x")
            await until_terminal(first, "r1")
            await send(second, run_frame("hi", run_id="r3"))
            accepted = await until_terminal(second, "r3")
    assert (refused["code"], refused["runId"]) == ("too_many_runs", "r2")
    assert accepted[-1]["type"] == "RUN_FINISHED"


async def test_too_many_connections_are_rejected_at_the_handshake() -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime(), max_connections=1) as service:
            async with open_service_connection(service.url):
                status = await handshake_status(service.port)
            async with open_service_connection(service.url) as ws:
                await send(ws, {"type": "ping"})
                assert await receive(ws) == {"type": "pong"}
    assert status == 503


async def test_a_vanished_client_cancels_its_runs_at_once() -> None:
    runtime = FakeRuntime()
    with trio.fail_after(10):
        async with running_service(runtime) as service:
            stream = await trio.open_tcp_stream("127.0.0.1", service.port)
            async with trio.open_nursery() as nursery:
                ws = await wrap_client_stream(nursery, stream, "127.0.0.1", "/")
                await send(ws, run_frame("hold:never", run_id="r1", thread_id="t1"))
                await send(ws, run_frame("hold:never", run_id="r2", thread_id="t2"))
                await wait_until(lambda: len(runtime.started) == 2)
                await stream.aclose()  # the TCP connection drops without a closing handshake
                nursery.cancel_scope.cancel()
            await wait_until(lambda: service.statistics().connections == 0)
            stats = service.statistics()
    assert sorted(runtime.cancelled) == ["r1", "r2"]
    assert stats.runs == 0


async def test_a_slow_reader_slows_its_run_instead_of_buffering() -> None:
    runtime = FakeRuntime()
    with trio.fail_after(30):
        async with running_service(runtime) as service, open_service_connection(service.url) as ws:
            await send(ws, run_frame("flood:2000", run_id="r1"))
            await trio.testing.wait_all_tasks_blocked()  # every task waits, no I/O is ready: the run is stalled
            stalled_at = runtime.sent.get("r1", 0)
            events = await until_terminal(ws, "r1")
    # 2000 deltas of 64 KiB is 128 MiB: the run stalled after what the socket buffers and bounded channels hold.
    assert stalled_at < 500
    assert len(events) == 2000 + 4
    assert events[-1]["type"] == "RUN_FINISHED"


async def test_an_idle_connection_is_closed(autojump_clock: trio.abc.Clock) -> None:
    with trio.fail_after(10):
        async with (
            running_service(FakeRuntime(), idle_timeout=0.3) as service,
            open_service_connection(service.url) as ws,
        ):
            with pytest.raises(ConnectionClosed) as closed:
                await ws.get_message()
    assert closed.value.reason.code == 1000
    assert closed.value.reason.reason == "idle timeout"


async def test_a_connection_with_a_run_in_flight_is_not_idle(autojump_clock: trio.abc.Clock) -> None:
    runtime = FakeRuntime()
    with trio.fail_after(10):
        async with running_service(runtime, idle_timeout=0.2) as service, open_service_connection(service.url) as ws:
            await send(ws, run_frame("hold:x", run_id="r1"))
            assert (await receive(ws))["type"] == "RUN_STARTED"
            # Three idle timeouts, released between two keepalive pings (every 0.1 s): a ping reaching the
            # client just as it closes makes trio-websocket's client answer it in the closing state, which
            # kills that client's reader (a client library bug), so the end is kept off the pings' beat. The
            # autojump clock plays the timeouts: each pong is back before the next ping however loaded the
            # machine (in real time, a 0.1 s stall of this process between a ping and its pong dropped the client).
            await trio.sleep(0.65)
            runtime.release("x")
            events = await until_terminal(ws, "r1")
    assert events[-1]["type"] == "RUN_FINISHED"


async def _http_get(port: int, path: str, method: str = "GET") -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        response = b""
        while chunk := await stream.receive_some():
            response += chunk
    return response


async def test_the_page_is_served_over_plain_http_on_the_same_port() -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime()) as service:
            page = await _http_get(service.port, "/")
            missing = await _http_get(service.port, "/etc/passwd")
            posted = await _http_get(service.port, "/", method="POST")
            async with open_service_connection(service.url) as ws:
                await send(ws, {"type": "ping"})
                pong = await receive(ws)
    head, _, body = page.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert b"text/html" in head
    assert body.lower().startswith(b"<!doctype html>")
    assert missing.startswith(b"HTTP/1.1 404 ")
    assert posted.startswith(b"HTTP/1.1 405 ")
    assert pong == {"type": "pong"}


@asynccontextmanager
async def holding(
    runtime: FakeRuntime, hold: str, run_id: str = "r1", **service: object
) -> AsyncIterator[tuple[Service, WebSocketConnection]]:
    """A service on ``runtime`` (``service``: its settings) and a connection whose run ``run_id``, held on ``hold``
    until the runtime releases it, has started."""
    async with running_service(runtime, **service) as served, open_service_connection(served.url) as ws:
        await send(ws, run_frame(f"hold:{hold}", run_id=run_id))
        assert (await receive(ws))["type"] == "RUN_STARTED"
        yield served, ws


@asynccontextmanager
async def shutting_down(
    runtime: FakeRuntime, *, grace: float, hold: str
) -> AsyncIterator[tuple[Service, WebSocketConnection]]:
    """A service on ``runtime`` whose run ``r1`` (held on ``hold``) has started, then told to shut down with
    ``grace`` seconds for its runs: the block runs while it shuts down, and the shutdown ends with it."""
    async with holding(runtime, hold, shutdown_grace=grace) as (service, ws), trio.open_nursery() as nursery:
        nursery.start_soon(service.shutdown)
        yield service, ws


async def test_graceful_shutdown_lets_short_runs_finish() -> None:
    runtime = FakeRuntime()
    with trio.fail_after(10):
        async with shutting_down(runtime, grace=5, hold="x") as (service, ws):
            await wait_until(lambda: service.statistics().closing)
            runtime.release("x")
            events = await until_terminal(ws, "r1")
            with pytest.raises(ConnectionClosed) as closed:
                await ws.get_message()
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["outcome"] == {"type": "success"}
    assert closed.value.reason.code == 1001


async def test_graceful_shutdown_cancels_long_runs_with_a_terminal_event() -> None:
    runtime = FakeRuntime()
    with trio.fail_after(10):
        async with shutting_down(runtime, grace=0.2, hold="never") as (_, ws):
            events = await until_terminal(ws, "r1")
            with pytest.raises(ConnectionClosed) as closed:
                await ws.get_message()
    assert [e["type"] for e in events] == ["RUN_FINISHED"]
    assert events[0]["outcome"] == {"type": "cancelled"}
    assert runtime.cancelled == ["r1"]
    assert closed.value.reason.code == 1001


async def test_no_new_runs_or_websocket_connections_while_shutting_down() -> None:
    runtime = FakeRuntime()
    with trio.fail_after(10):
        async with shutting_down(runtime, grace=5, hold="x") as (service, ws):
            await wait_until(lambda: service.statistics().closing)
            await send(ws, run_frame("hi", run_id="r2"))
            refused = await receive(ws)
            # The listener stays open through the grace (health checks see 503); upgrades are refused.
            assert await handshake_status(service.port) == 503
            runtime.release("x")
            await until_terminal(ws, "r1")
    assert (refused["code"], refused["runId"]) == ("shutting_down", "r2")


async def test_a_run_that_ends_without_a_terminal_event_still_gets_one() -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime()) as service, open_service_connection(service.url) as ws:
            await send(ws, run_frame("vanish", run_id="r1"))
            events = await until_terminal(ws, "r1")
    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["code"] == "run_incomplete"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


async def test_a_client_that_stops_answering_pings_is_dropped_and_its_runs_cancelled(
    autojump_clock: trio.abc.Clock,
) -> None:
    runtime = FakeRuntime()
    client = WSConnection(ConnectionType.CLIENT)
    with trio.fail_after(10):
        async with running_service(runtime, idle_timeout=0.4) as service:
            stream = await trio.open_tcp_stream("127.0.0.1", service.port)
            async with stream:
                await stream.send_all(client.send(Request(host="127.0.0.1", target="/")))
                client.receive_data(await stream.receive_some())
                assert any(isinstance(event, AcceptConnection) for event in client.events())
                frame = json.dumps(run_frame("hold:never", run_id="r1"))
                await stream.send_all(client.send(TextMessage(data=frame)))
                # from now on the client reads nothing: the service's pings go unanswered
                await wait_until(lambda: runtime.cancelled == ["r1"])
                await wait_until(lambda: service.statistics().connections == 0)
    assert service.statistics().runs == 0


async def test_an_oversized_request_head_is_dropped() -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime()) as service:
            stream = await trio.open_tcp_stream("127.0.0.1", service.port)
            async with stream:
                await stream.send_all(b"GET / HTTP/1.1\r\n" + b"X-Filler: " + b"x" * 40_000)
                try:
                    answer = await stream.receive_some()
                except trio.BrokenResourceError:  # closed with our bytes unread: a reset
                    answer = b""
    assert answer == b""


async def test_serve_service_reports_its_handle_and_returns_after_shutdown() -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            service = await nursery.start(serve_service, FakeRuntime(), ServiceSpec(host="127.0.0.1", port=0))
            async with open_service_connection(service.url) as ws:
                await send(ws, {"type": "ping"})
                assert await receive(ws) == {"type": "pong"}
            await service.shutdown()
    assert service.statistics() == ServiceStatistics(connections=0, runs=0, closing=True)
