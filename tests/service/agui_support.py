"""A small AG-UI HTTP client for tests: POST a ``RunAgentInput``, read the JSON error or the SSE events."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import h11
import trio

from yao_actors.events import parse_event


@attrs.define
class AguiResponse:
    """The answer to one POST: status, headers, and either the SSE events (with their ids) or the raw body."""

    status: int
    headers: dict[str, str]
    reason: bytes = b""
    body: bytes = b""
    events: list[dict[str, Any]] = attrs.field(factory=list)
    ids: list[str] = attrs.field(factory=list)
    #: SSE comment lines received (the service's probes of a half-closed client).
    comments: int = 0

    def json(self) -> Any:
        return json.loads(self.body)


def run_input(
    content: str | None = None, *, thread_id: str = "t1", run_id: str = "r1", **fields: Any
) -> dict[str, Any]:
    """A ``RunAgentInput`` with one user message (or ``fields["messages"]``)."""
    body: dict[str, Any] = {"threadId": thread_id, "runId": run_id, "messages": []}
    if content is not None:
        body["messages"] = [{"id": "u1", "role": "user", "content": content}]
    return body | fields


@asynccontextmanager
async def open_agui(
    port: int,
    body: bytes | Mapping[str, Any],
    *,
    path: str = "/agui",
    headers: Mapping[str, str] | None = None,
    half_close: bool = False,
) -> AsyncIterator[tuple[AguiResponse, AsyncIterator[dict[str, Any]]]]:
    """POST and yield the response head and an iterator of its SSE events (each checked against ag_ui's models).

    ``half_close``: once the request is sent, shut the socket's sending side (``SHUT_WR``) and go on reading.
    Leaving the block closes the connection (a client going away).
    """
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        connection = h11.Connection(h11.CLIENT)
        fields = [
            ("host", f"127.0.0.1:{port}"),
            ("content-type", "application/json"),
            ("accept", "text/event-stream"),
            ("content-length", str(len(data))),
            *(headers or {}).items(),
        ]
        await stream.send_all(connection.send(h11.Request(method="POST", target=path, headers=fields)))
        await stream.send_all(connection.send(h11.Data(data=data)) + connection.send(h11.EndOfMessage()))
        if half_close:
            await stream.send_eof()
        event = await _next(stream, connection)
        assert isinstance(event, h11.Response), event
        response = AguiResponse(
            event.status_code, {k.decode(): v.decode() for k, v in event.headers}, reason=event.reason
        )
        async with contextlib.aclosing(_events(stream, connection, response)) as events:
            yield response, events


@asynccontextmanager
async def stalled_agui(
    port: int, body: Mapping[str, Any], *, path: str = "/agui", headers: Mapping[str, str] | None = None
) -> AsyncIterator[trio.SocketStream]:
    """POST ``body`` from a client that never reads the answer: its receive buffer is made as small as the kernel
    allows (before connecting, so the window it offers stays small), and the service's writes soon find it full.
    Yields the connection (still unread); leaving the block closes it."""
    data = json.dumps(body).encode()
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
    sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_RCVBUF, 1024)
    await sock.connect(("127.0.0.1", port))
    stream = trio.SocketStream(sock)
    async with stream:
        fields = [
            ("host", f"127.0.0.1:{port}"),
            ("content-type", "application/json"),
            ("accept", "text/event-stream"),
            ("content-length", str(len(data))),
            *(headers or {}).items(),
        ]
        connection = h11.Connection(h11.CLIENT)
        request = connection.send(h11.Request(method="POST", target=path, headers=fields))
        await stream.send_all(request + connection.send(h11.Data(data=data)) + connection.send(h11.EndOfMessage()))
        yield stream


async def post_agui(
    port: int,
    body: bytes | Mapping[str, Any],
    *,
    path: str = "/agui",
    headers: Mapping[str, str] | None = None,
    half_close: bool = False,
) -> AguiResponse:
    """POST and read the whole answer: a JSON error's body, or every SSE event (``half_close``: see
    :func:`open_agui`)."""
    async with open_agui(port, body, path=path, headers=headers, half_close=half_close) as (response, events):
        async for _ in events:
            pass
    return response


async def _events(
    stream: trio.SocketStream, connection: h11.Connection, response: AguiResponse
) -> AsyncIterator[dict[str, Any]]:
    buffer = b""
    while True:
        event = await _next(stream, connection)
        if isinstance(event, h11.Data):
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                response.body += event.data
                continue
            buffer += event.data
            while b"\n\n" in buffer:
                message, buffer = buffer.split(b"\n\n", 1)
                lines = [line for line in message.decode().split("\n") if not line.startswith(":")]  # comments
                response.comments += message.count(b"\n:") + message.startswith(b":")
                if not lines:
                    continue
                fields = dict(line.split(": ", 1) for line in lines)
                parsed = json.loads(fields["data"])
                parse_event(parsed)
                response.events.append(parsed)
                response.ids.append(fields.get("id", ""))
                yield parsed
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            return


async def _next(stream: trio.SocketStream, connection: h11.Connection) -> h11.Event:
    while True:
        event = connection.next_event()
        if event is not h11.NEED_DATA:
            return event
        connection.receive_data(await stream.receive_some(65536))
