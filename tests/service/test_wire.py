"""ServerWebSocket: the handshake, a batch of text messages framed as wsproto frames them in one write, pings,
closing, fragments and limits — against trio-websocket's client, as the service's clients use it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from trio_websocket import ConnectionClosed, WebSocketConnection, wrap_client_stream
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Request, TextMessage
from wsproto.extensions import PerMessageDeflate
from wsproto.frame_protocol import FrameProtocol

from tests.service.fake_runtime import FakeRuntime
from tests.service.support import running_service
from yao_actors.service.gate import read_head
from yao_actors.service.websocket import ServerWebSocket, UpgradeRequest
from yao_actors.service.wire import text_frame

KEY = b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
VERSION = b"Sec-WebSocket-Version: 13\r\n"


async def upgrade(server: ServerWebSocket, stream: trio.abc.ReceiveStream) -> UpgradeRequest | None:
    """The upgrade request on ``stream``, read as the gate reads it."""
    head = await read_head(stream)
    assert head is not None
    return await server.handshake(head)


class CountingStream(trio.abc.Stream):
    """A stream that counts the writes going through it to ``inner``."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.writes: list[bytes] = []

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def websocket_pair(
    max_message_size: int = 1 << 20,
) -> AsyncIterator[tuple[ServerWebSocket, WebSocketConnection, CountingStream]]:
    """A server websocket (accepted, as the front end accepts) and its client, over an in-memory stream pair."""
    server_side, client_side = trio.testing.memory_stream_pair()
    counting = CountingStream(server_side)
    server = ServerWebSocket(counting, max_message_size=max_message_size)
    async with trio.open_nursery() as nursery:

        async def serve() -> None:
            await server.accept(await upgrade(server, server_side), None)

        nursery.start_soon(serve)
        client = await wrap_client_stream(nursery, client_side, "localhost", "/")
        await trio.testing.wait_all_tasks_blocked()
        yield server, client, counting
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("size", [0, 1, 125, 126, 65535, 65536, 70000])
def test_a_text_frame_is_byte_identical_to_wsprotos(size: int) -> None:
    text = ("北" * size)[: size // 3] + "x" * (size - 3 * (size // 3))  # UTF-8 payload of exactly ``size`` bytes
    assert len(text.encode()) == size
    header, payload = text_frame(text)
    assert header + payload == bytes(FrameProtocol(client=False, extensions=[]).send_data(text))
    assert text_frame(text.encode()) == (header, payload)


def test_a_lone_surrogate_cannot_be_framed() -> None:
    with pytest.raises(UnicodeEncodeError):
        text_frame("\ud800")


async def test_a_batch_goes_out_in_one_write_and_arrives_as_separate_messages() -> None:
    async with websocket_pair() as (server, client, counting):
        before = len(counting.writes)
        messages = ['{"type":"A"}', "北京今天适合穿什么?", "x" * 70000]
        await server.send_messages(messages)
        assert len(counting.writes) == before + 1
        assert [await client.get_message() for _ in messages] == messages
        await server.send_messages([b'{"type":"B"}'])  # bytes: text already encoded
        assert await client.get_message() == '{"type":"B"}'


async def test_messages_fragments_and_pings_are_read_in_the_readers_own_task() -> None:
    async with websocket_pair() as (server, client, _):
        await client.send_message("one")
        await client.send_message(b"two")
        assert await server.get_message() == "one"
        assert await server.get_message() == b"two"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.ping, b"are you there")
            with trio.fail_after(5):
                assert await server.get_message(trio.current_time() + 0.5) is None  # answered the ping meanwhile
        await server.ping()
        assert server.awaiting_pong
        with trio.fail_after(5):
            assert await server.get_message(trio.current_time() + 0.5) is None
        assert not server.awaiting_pong  # the client's pong came back


async def test_a_fragmented_message_is_put_together() -> None:
    server_side, client_side = trio.testing.memory_stream_pair()
    server = ServerWebSocket(server_side, max_message_size=100)
    client = WSConnection(ConnectionType.CLIENT)
    frames = FrameProtocol(client=True, extensions=[])
    data = client.send(Request(host="localhost", target="/")) + frames.send_data("ab", fin=False)
    data += frames.send_data("cd", fin=True)  # the first frame's continuation
    await client_side.send_all(data)
    with trio.fail_after(5):
        await server.accept(await upgrade(server, server_side), None)
        assert await server.get_message() == "abcd"


async def test_a_message_beyond_the_limit_closes_the_connection_1009() -> None:
    async with websocket_pair(max_message_size=10) as (server, client, _):
        await client.send_message("x" * 11)
        with pytest.raises(ConnectionClosed) as closed:
            await server.get_message()
        assert closed.value.reason.code == 1009
        with pytest.raises(ConnectionClosed):
            await client.get_message()
    assert client.closed is not None
    assert client.closed.code == 1009
    assert "maximum message size" in (client.closed.reason or "")


async def test_the_clients_close_is_answered_and_a_closed_connection_refuses_writes() -> None:
    async with websocket_pair() as (server, client, _):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.aclose, 4000, "bye")  # returns once the server has answered the close
            with pytest.raises(ConnectionClosed) as closed:
                await server.get_message()
        assert closed.value.reason.code == 4000
        assert server.closed is not None
        with pytest.raises(ConnectionClosed):
            await server.send_messages(["too late"])
        with pytest.raises(ConnectionClosed):
            await server.ping()


async def test_closing_sends_the_code_and_waits_for_the_clients_answer() -> None:
    async with websocket_pair() as (server, client, _):
        with trio.fail_after(5):
            await server.aclose(1001, "going away")
        with pytest.raises(ConnectionClosed):
            await client.get_message()
    assert client.closed is not None
    assert (client.closed.code, client.closed.reason) == (1001, "going away")


async def test_a_vanished_client_is_a_1006() -> None:
    async with websocket_pair() as (server, _, counting):
        await counting.inner.aclose()
        with pytest.raises(ConnectionClosed) as closed:
            await server.get_message()
    assert closed.value.reason.code == 1006


@pytest.mark.parametrize(
    ("head", "status", "names_the_version"),
    [
        pytest.param(b"Upgrade: websocket\r\nConnection: Upgrade\r\n", b"400", True, id="no key, no version"),
        pytest.param(
            b"Upgrade: websocket\r\nConnection: keep-alive\r\n" + KEY + VERSION, b"400", False, id="no upgrade"
        ),
        pytest.param(b"Upgrade: websocket\r\nConnection: Upgrade\r\n" + KEY, b"400", True, id="no version"),
        pytest.param(
            b"Upgrade: websocket\r\nConnection: Upgrade\r\n" + KEY + b"Sec-WebSocket-Version: 8\r\n",
            b"426",
            True,
            id="v8",
        ),
        pytest.param(b"Upgrade: websocket\r\nConnection: Upgrade\r\n" + VERSION, b"400", False, id="no key"),
    ],
)
async def test_a_bad_upgrade_request_is_refused_as_wsproto_refuses_it(
    head: bytes, status: bytes, names_the_version: bool
) -> None:
    server_side, client_side = trio.testing.memory_stream_pair()
    server = ServerWebSocket(server_side, max_message_size=100)
    await client_side.send_all(b"GET / HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n")
    with trio.fail_after(5):
        assert await upgrade(server, server_side) is None
        answer = await client_side.receive_some()
    assert answer.startswith(b"HTTP/1.1 " + status + b" ")
    assert (b"sec-websocket-version: 13\r\n" in answer) == names_the_version


async def test_every_proposed_subprotocol_counts_and_the_selected_one_is_answered() -> None:
    server_side, client_side = trio.testing.memory_stream_pair()
    server = ServerWebSocket(server_side, max_message_size=100)
    client = WSConnection(ConnectionType.CLIENT)
    request = Request(host="localhost", target="/", subprotocols=["a", "yao-actors"])
    data = client.send(request).replace(
        b"Sec-WebSocket-Protocol: a, yao-actors", b"Sec-WebSocket-Protocol: a\r\nSec-WebSocket-Protocol: b, yao-actors"
    )
    await client_side.send_all(data)
    with trio.fail_after(5):
        upgraded = await upgrade(server, server_side)
        assert upgraded is not None
        assert upgraded.subprotocols == ("a", "b", "yao-actors")
        await server.accept(upgraded, "yao-actors")
        client.receive_data(await client_side.receive_some())
    [accepted] = client.events()
    assert isinstance(accepted, AcceptConnection)
    assert accepted.subprotocol == "yao-actors"


async def test_the_service_accepts_no_extension_so_its_frames_need_none() -> None:
    """A client proposing permessage-deflate gets a plain websocket, and the service's frames are plain text frames."""
    async with running_service(FakeRuntime()) as service:
        stream = await trio.open_tcp_stream("127.0.0.1", service.port)
        async with stream:
            client = WSConnection(ConnectionType.CLIENT)
            request = Request(host="127.0.0.1", target="/", extensions=[PerMessageDeflate()])
            await stream.send_all(client.send(request))
            events: list[Any] = []
            with trio.fail_after(10):
                while not any(isinstance(event, AcceptConnection) for event in events):
                    client.receive_data(await stream.receive_some())
                    events += client.events()
                [accepted] = [event for event in events if isinstance(event, AcceptConnection)]
                assert accepted.extensions == []
                await stream.send_all(client.send(TextMessage(data='{"type": "ping"}')))
                data = b""
                while len(data) < 17:
                    data += await stream.receive_some()
    assert data == b"\x81\x0f" + b'{"type":"pong"}'


async def test_a_batch_waiting_for_the_write_lock_is_not_sent_once_the_connection_closes() -> None:
    server_side, client_side = trio.testing.lockstep_stream_pair()  # a write waits until the client reads it
    server = ServerWebSocket(server_side, max_message_size=100)
    client = WSConnection(ConnectionType.CLIENT)
    outcomes: list[str] = []

    async def send(text: str) -> None:
        try:
            await server.send_messages([text])
            outcomes.append(text)
        except ConnectionClosed:
            outcomes.append(f"{text}: closed")

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client_side.send_all, client.send(Request(host="localhost", target="/")))
            upgraded = await upgrade(server, server_side)
            assert upgraded is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.accept, upgraded, None)
            client.receive_data(await client_side.receive_some())
        events: list[Any] = list(client.events())
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send, "first")
            await trio.testing.wait_all_tasks_blocked()  # writing, holding the lock
            nursery.start_soon(send, "second")
            await trio.testing.wait_all_tasks_blocked()  # waiting for the lock
            nursery.start_soon(server.aclose, 1000, "bye")  # closing: the waiting batch must not go out
            await trio.testing.wait_all_tasks_blocked()
            while not any(isinstance(event, CloseConnection) for event in events):
                client.receive_data(await client_side.receive_some())
                events += client.events()
            [close] = [event for event in events if isinstance(event, CloseConnection)]
            await client_side.send_all(client.send(close.response()))  # the closing handshake ends aclose
    assert outcomes == ["first", "second: closed"]
    assert [event.data for event in events if isinstance(event, TextMessage)] == ["first"]
    assert (close.code, close.reason) == (1000, "bye")


class StopsTaking(CountingStream):
    """A stream whose writes stop going out after the first ``writes`` (a client that stopped reading)."""

    def __init__(self, inner: trio.abc.Stream, writes: int) -> None:
        super().__init__(inner)
        self.limit = writes

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if len(self.writes) >= self.limit:
            await trio.sleep_forever()
        await super().send_all(data)


async def test_a_client_that_sends_and_never_reads_cannot_hold_the_reader(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server_side, client_side = trio.testing.memory_stream_pair()
    server = ServerWebSocket(StopsTaking(server_side, writes=1), max_message_size=100, reply_timeout=5)
    client = WSConnection(ConnectionType.CLIENT)
    await client_side.send_all(client.send(Request(host="localhost", target="/")) + FrameProtocol(True, []).ping())
    upgraded = await upgrade(server, server_side)
    assert upgraded is not None
    await server.accept(upgraded, None)  # the one write that goes out
    with trio.fail_after(60), pytest.raises(ConnectionClosed) as closed:
        await server.get_message()  # the ping's pong cannot go out: the client never reads
    assert closed.value.reason.code == 1006
