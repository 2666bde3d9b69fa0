"""The ASGI application's deadline for a request to arrive whole: the native service's (``HANDSHAKE_TIMEOUT``),
so a body trickled in a byte every two seconds is cut with ``408`` and the connection closed, not read for ever.
Trio's autojump clock: the minutes pass in milliseconds."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from yao_actors.asgi import AsgiApp
from yao_actors.config import Config
from yao_actors.service.frontend import HANDSHAKE_TIMEOUT
from yao_actors.transports import open_client

SCOPE = {"type": "http", "method": "POST", "path": "/agui", "query_string": b"", "headers": []}


class Service:
    """The service's side: the requests it was handed."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    async def serve_exchange(self, exchange: Any) -> None:
        await trio.lowlevel.checkpoint()
        self.requests.append(exchange.request)


class HostHere:
    """A guest whose host is this Trio run (the host's coroutines are awaited in place)."""

    async def host(self, fn: Any, *args: Any) -> Any:
        return await fn(*args)


async def _answer(
    body_timeout: float, between: float, size: int = 1000, service: Service | None = None
) -> tuple[list[dict[str, Any]], float]:
    """POST a ``size``-byte body a byte every ``between`` seconds; the ASGI messages answered, and when."""
    yao = AsgiApp(Config(), models=None, connect=open_client, body_timeout=body_timeout)
    sent: list[dict[str, Any]] = []
    left = size

    async def receive() -> dict[str, Any]:
        nonlocal left
        await trio.sleep(between)
        left -= 1
        return {"type": "http.request", "body": b" ", "more_body": left > 0}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = {"content-length": str(size)}
    await yao._serve_http(HostHere(), service or Service(), SCOPE, receive, send, headers)  # type: ignore[arg-type]
    return sent, trio.current_time()


async def test_a_trickled_body_is_cut_at_the_native_deadline(autojump_clock: trio.testing.MockClock) -> None:
    sent, at = await _answer(HANDSHAKE_TIMEOUT, between=2.0)
    start, body = sent
    assert start["status"] == 408
    assert (b"connection", b"close") in start["headers"]
    assert (
        json.loads(body["body"])["error"]["message"]
        == f"the request did not arrive whole within {HANDSHAKE_TIMEOUT:g}s"
    )
    assert at == HANDSHAKE_TIMEOUT


async def test_a_body_that_arrives_in_time_is_read_whole(autojump_clock: trio.testing.MockClock) -> None:
    service = Service()
    sent, _ = await _answer(HANDSHAKE_TIMEOUT, between=0.05, size=100, service=service)
    assert sent == []  # nothing refused: the service answers (this one says nothing)
    [request] = service.requests
    assert (request.method, request.target, request.body) == ("POST", "/agui", b" " * 100)
