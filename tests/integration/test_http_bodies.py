"""A response body an MCP session's HTTP client closes before its end leaves no generator for the collector.

httpx2 does not close httpcore2's innermost body generator when the chain above it is closed; Trio would report
it, whenever the collector finds it, as a ``ResourceWarning`` (it failed CI at random). The server here is a real
loopback socket that sends the start of a chunked body and then holds the connection open, so every read stops
midway.
"""

from __future__ import annotations

import functools
import gc
import warnings
from contextlib import aclosing

import httpx2
import trio
from mcp.shared._httpx_utils import stream_within_origin

from yao_actors.transports.http import resilient_transport
from yao_actors.transports.link import Link

_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
_FIRST = b"data: one\n\n"


async def _endless_body(stream: trio.SocketStream) -> None:
    """Answer one request with the first chunk of a body that never ends."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += await stream.receive_some(4096)
    await stream.send_all(_HEAD + b"%x\r\n" % len(_FIRST) + _FIRST + b"\r\n")
    await trio.sleep_forever()


async def _closed_midway(url: str, stop: str) -> list[warnings.WarningMessage]:
    """Read the first chunk through the session's transport, leave (``stop``), collect; the warnings seen."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        async with httpx2.AsyncClient(transport=resilient_transport(Link())) as client:
            if stop == "close the iteration":  # what httpx2.EventSource's consumers with aclosing() do
                async with (
                    stream_within_origin(client, "GET", url) as response,
                    aclosing(response.aiter_bytes()) as parts,
                ):
                    assert await anext(parts) == _FIRST
            else:  # cancelled while waiting for the next chunk
                with trio.CancelScope() as scope:
                    async with stream_within_origin(client, "GET", url) as response:
                        async for part in response.aiter_bytes():
                            assert part == _FIRST
                            scope.cancel()
        gc.collect()
        await trio.lowlevel.checkpoint()
        gc.collect()
    return [w for w in seen if issubclass(w.category, ResourceWarning)]


async def test_a_body_left_midway_is_unwound_when_closed(nursery: trio.Nursery) -> None:
    with trio.fail_after(10):
        listeners = await nursery.start(functools.partial(trio.serve_tcp, _endless_body, 0, host="127.0.0.1"))
        url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/mcp"
        for stop in ("close the iteration", "cancel the read"):
            assert [str(w.message) for w in await _closed_midway(url, stop)] == [], stop
