"""The terminal client: ``yao-actors chat "question"`` — ask over the websocket and print the stream as it arrives.

:func:`open_client` is the connection (also what tests and the load benchmark use); :func:`chat` sends one
question and renders the run with a :class:`Renderer` (readable, or raw JSON lines with ``--json``). The exit
code is 0 when the run finished, 1 on ``RUN_ERROR``, 2 when the service could not be reached or refused us.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final
from urllib.parse import urlsplit

import trio
from trio_websocket import WebSocketConnection, wrap_client_stream

from yao_actors.service.auth import BEARER_PREFIX, SUBPROTOCOL

DEFAULT_URL: Final = "ws://127.0.0.1:8765/"
#: Seconds to connect and finish the handshake.
CONNECT_TIMEOUT: Final = 10.0


@asynccontextmanager
async def open_client(
    url: str = DEFAULT_URL, *, token: str | None = None, browser_style: bool = False
) -> AsyncIterator[WebSocketConnection]:
    """Connect to the service at ``url`` (``ws://`` only), presenting ``token`` if given.

    The token goes in an ``Authorization: Bearer`` header, or with ``browser_style`` as the ``bearer.<token>``
    subprotocol the page uses. The TCP stream is owned here and always closed, also when the service closed
    the websocket first.
    """
    parts = urlsplit(url)
    if parts.scheme != "ws" or parts.hostname is None:
        raise ValueError(f"expected a ws://host:port/ URL, got {url!r}")
    headers = [(b"Authorization", f"Bearer {token}".encode())] if token and not browser_style else []
    subprotocols = [SUBPROTOCOL] + ([BEARER_PREFIX + token] if token and browser_style else [])
    with trio.fail_after(CONNECT_TIMEOUT):
        stream = await trio.open_tcp_stream(parts.hostname, parts.port or 80)
    async with stream, trio.open_nursery() as nursery:
        with trio.fail_after(CONNECT_TIMEOUT):
            ws = await wrap_client_stream(
                nursery,
                stream,
                parts.netloc,
                parts.path or "/",
                subprotocols=subprotocols,
                extra_headers=headers,
            )
        try:
            yield ws
        finally:
            with trio.move_on_after(CONNECT_TIMEOUT, shield=True):
                await ws.aclose()
            nursery.cancel_scope.cancel()
