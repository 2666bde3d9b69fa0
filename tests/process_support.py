"""Helpers for tests that talk to real processes and sockets."""

from __future__ import annotations

import trio


async def read_line(stream: trio.abc.ReceiveStream, *, end: bytes = b"\n") -> str:
    """Read up to and including ``end``, one byte at a time so nothing past it is consumed.

    Raises ``EOFError`` if the stream ends first (the process exited, the peer closed).
    """
    data = b""
    while not data.endswith(end):
        chunk = await stream.receive_some(1)
        if not chunk:
            raise EOFError(f"the stream ended before {end!r} (read {data!r})")
        data += chunk
    return data[: -len(end)].decode()
