"""The gate's ReplayStream: the bytes read ahead come back first, then the inner stream; writes go straight through."""

from __future__ import annotations

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


async def test_writes_go_straight_through_and_the_head_is_replayed() -> None:
    inner = RecordingStream()
    stream = ReplayStream(b"GET / HTTP/1.1\r\n\r\n", inner)
    await stream.send_all(b"a")
    await stream.send_all(b"b")
    assert inner.writes == [b"a", b"b"]
    assert await stream.receive_some() == b"GET / HTTP/1.1\r\n\r\n"
