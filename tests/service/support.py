"""Helpers for service tests: a service on a loopback port, and a client that reads JSON frames."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import h11
import trio
from trio_websocket import WebSocketConnection

from yao_actors.cli.chat import open_service_connection
from yao_actors.config import Config, ServiceSpec
from yao_actors.models.base import Model
from yao_actors.runtime import Runtime, open_runtime
from yao_actors.service import Service, open_service
from yao_actors.service.http_endpoints import Observable
from yao_actors.service.served import ServedRuntime
from yao_actors.testing import read_line

TERMINAL = {"RUN_FINISHED", "RUN_ERROR"}


@asynccontextmanager
async def running_service(
    runtime: ServedRuntime, *, servers: Mapping[str, Observable] | None = None, **limits: Any
) -> AsyncIterator[Service]:
    """A service for ``runtime`` on 127.0.0.1 and a free port, with ``limits`` overriding the defaults.

    ``servers`` are what ``/readyz`` reports (by default a real runtime's own).
    """
    spec = attrs.evolve(ServiceSpec(host="127.0.0.1", port=0), **limits)
    async with open_service(runtime, spec, servers=servers) as service:
        yield service


async def send(ws: WebSocketConnection, frame: dict[str, Any]) -> None:
    await ws.send_message(json.dumps(frame))


def run_frame(content: str, *, run_id: str, thread_id: str | None = None, **extra: Any) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "run", "runId": run_id, "messages": [{"role": "user", "content": content}]}
    if thread_id is not None:
        frame["threadId"] = thread_id
    return frame | extra


async def receive(ws: WebSocketConnection) -> dict[str, Any]:
    message = await ws.get_message()
    assert isinstance(message, str)
    frame: dict[str, Any] = json.loads(message)
    return frame


async def until_terminal(ws: WebSocketConnection, run_id: str) -> list[dict[str, Any]]:
    """Read frames until the terminal event of ``run_id``; returns that run's events (others are dropped)."""
    events: list[dict[str, Any]] = []
    while True:
        frame = await receive(ws)
        if frame.get("runId") == run_id:
            events.append(frame)
            if frame["type"] in TERMINAL:
                return events


async def until_all_terminal(ws: WebSocketConnection, run_ids: set[str]) -> dict[str, list[dict[str, Any]]]:
    """Read frames until every run in ``run_ids`` has ended; returns each run's events."""
    events: dict[str, list[dict[str, Any]]] = {run_id: [] for run_id in run_ids}
    pending = set(run_ids)
    while pending:
        frame = await receive(ws)
        if frame.get("runId") in events:
            events[frame["runId"]].append(frame)
            if frame["type"] in TERMINAL:
                pending.discard(frame["runId"])
    return events


async def wait_until(predicate: Any) -> None:
    """Poll a condition set by another task (a hang guard around the test bounds it)."""
    while True:
        if predicate():
            return
        await trio.sleep(0.01)


async def handshake_status(port: int, headers: dict[str, str] | None = None, *, path: str = "/") -> int:
    """Send a websocket upgrade request for ``path`` with ``headers`` (``Host`` may be replaced) and return the
    HTTP status."""
    headers = {"Host": f"127.0.0.1:{port}", **(headers or {})}
    lines = [
        f"GET {path} HTTP/1.1",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode())
        status_line = await read_line(stream, end=b"\r\n")
    return int(status_line.split(" ", 2)[1])


@attrs.frozen
class HttpReply:
    """A plain HTTP response as the service sent it."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


async def read_message(
    connection: h11.Connection, stream: trio.abc.ReceiveStream
) -> tuple[h11.Request | h11.Response | None, bytes]:
    """Read one whole HTTP/1.1 message from ``stream`` through ``connection`` (a client's or a server's): its head
    (``None`` when there was none) and its body."""
    head: h11.Request | h11.Response | None = None
    body = b""
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(await stream.receive_some(65536))
        elif isinstance(event, h11.Request | h11.Response):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return head, body


async def http_request(
    port: int, path: str, *, method: str = "GET", headers: dict[str, str] | None = None
) -> HttpReply:
    """One plain HTTP/1.1 request to the service on 127.0.0.1:``port`` over a real socket, parsed with h11
    (``Host: 127.0.0.1:<port>`` unless ``headers`` give another)."""
    client = h11.Connection(h11.CLIENT)
    given = headers or {}
    host = [] if any(name.lower() == "host" for name in given) else [("Host", f"127.0.0.1:{port}")]
    sent = [*host, *given.items()]
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(client.send(h11.Request(method=method, target=path, headers=sent)) or b"")
        await stream.send_all(client.send(h11.EndOfMessage()) or b"")
        response, body = await read_message(client, stream)
    assert isinstance(response, h11.Response)
    decoded = {name.decode(): value.decode() for name, value in response.headers}
    return HttpReply(response.status_code, decoded, body)


@asynccontextmanager
async def connected(config: Config, model: Model) -> AsyncIterator[tuple[Runtime, WebSocketConnection]]:
    """The runtime of ``config`` with ``model`` as its model ``m``, served by :func:`running_service`, and a
    websocket connection to the service."""
    async with (
        open_runtime(config, models={"m": model}) as runtime,
        running_service(runtime) as service,
        open_service_connection(service.url) as ws,
    ):
        yield runtime, ws
