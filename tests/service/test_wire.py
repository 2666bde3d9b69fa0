"""MessageWriter: a batch of text messages framed as wsproto frames them, in one write, read back by a client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from trio_websocket import ConnectionClosed, WebSocketConnection, wrap_client_stream, wrap_server_stream
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Request, TextMessage
from wsproto.extensions import PerMessageDeflate
from wsproto.frame_protocol import FrameProtocol

from tests.service.fake_runtime import FakeRuntime
from tests.service.support import running_service
from yao_actors.service.gate import ReplayStream
from yao_actors.service.wire import MessageWriter, text_frame


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
async def websocket_pair() -> AsyncIterator[
    tuple[WebSocketConnection, WebSocketConnection, CountingStream, ReplayStream]
]:
    """A server websocket (accepted, as the front end accepts) and its client, over an in-memory stream pair."""
    server_side, client_side = trio.testing.memory_stream_pair()
    counting = CountingStream(server_side)
    replay = ReplayStream(b"", counting)
    async with trio.open_nursery() as nursery:
        accepted: list[WebSocketConnection] = []

        async def serve() -> None:
            request = await wrap_server_stream(nursery, replay)
            accepted.append(await request.accept())

        nursery.start_soon(serve)
        client = await wrap_client_stream(nursery, client_side, "localhost", "/")
        await trio.testing.wait_all_tasks_blocked()
        yield accepted[0], client, counting, replay
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
    async with websocket_pair() as (server, client, counting, replay):
        writer = MessageWriter(server, replay)
        before = len(counting.writes)
        messages = ['{"type":"A"}', "北京今天适合穿什么?", "x" * 70000]
        await writer.send(messages)
        assert len(counting.writes) == before + 1
        assert [await client.get_message() for _ in messages] == messages
        await writer.send([b'{"type":"B"}'])  # bytes: text already encoded
        assert await client.get_message() == '{"type":"B"}'


async def test_pings_are_still_answered_and_a_closed_connection_refuses_writes() -> None:
    async with websocket_pair() as (server, client, _, replay):
        writer = MessageWriter(server, replay)
        with trio.fail_after(5):
            await client.ping(b"are you there")  # the server's reader answers under the same send lock
        await writer.send(["after the ping"])
        assert await client.get_message() == "after the ping"
        with trio.fail_after(5):
            await client.aclose()  # returns once the server has answered the close: it is closed too
        assert server.closed is not None
        with pytest.raises(ConnectionClosed):
            await writer.send(["too late"])


async def test_without_a_stream_it_sends_message_by_message() -> None:
    async with websocket_pair() as (server, client, counting, _):
        writer = MessageWriter(server, None)
        before = len(counting.writes)
        await writer.send(["one", b"two"])
        assert len(counting.writes) == before + 2
        assert [await client.get_message(), await client.get_message()] == ["one", "two"]


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
