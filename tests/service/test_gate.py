"""The gate's ReplayStream: the bytes read ahead come back first; coalesced writes go out in one write, in order."""

from __future__ import annotations

import pytest
import trio

from yao_actors.service.gate import ReplayStream


class RecordingStream(trio.abc.Stream):
    """A stream that records every write it gets, and has nothing to read."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint()
        self.writes.append(bytes(data))

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        return b""

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def test_writes_outside_a_coalesced_block_go_straight_through() -> None:
    inner = RecordingStream()
    stream = ReplayStream(b"GET / HTTP/1.1\r\n\r\n", inner)
    await stream.send_all(b"a")
    await stream.send_all(b"b")
    assert inner.writes == [b"a", b"b"]
    assert await stream.receive_some() == b"GET / HTTP/1.1\r\n\r\n"


async def test_a_coalesced_block_sends_what_every_task_wrote_in_one_write_in_order() -> None:
    inner = RecordingStream()
    stream = ReplayStream(b"", inner)
    async with stream.coalesced():
        await stream.send_all(b"one,")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream.send_all, b"two,")  # another task, e.g. trio-websocket's pong
        async with stream.coalesced():  # nested: the outer block writes
            await stream.send_all(b"three")
        assert inner.writes == []
    assert inner.writes == [b"one,two,three"]
    await stream.send_all(b"after")
    assert inner.writes == [b"one,two,three", b"after"]


async def test_a_coalesced_block_left_by_an_exception_sends_nothing() -> None:
    inner = RecordingStream()
    stream = ReplayStream(b"", inner)

    async def failing_writer() -> None:
        async with stream.coalesced():
            await stream.send_all(b"lost")
            raise RuntimeError("the writer failed")

    with pytest.raises(RuntimeError):
        await failing_writer()
    await stream.send_all(b"next")
    assert inner.writes == [b"next"]


async def test_an_empty_coalesced_block_writes_nothing() -> None:
    inner = RecordingStream()
    async with ReplayStream(b"", inner).coalesced():
        pass
    assert inner.writes == []
