"""uvicorn with the service's graceful shutdown: runs in flight finish within ``shutdown_grace``, as under ``serve``.

At SIGTERM (or SIGINT) uvicorn stops listening and closes every websocket at once with code 1012, before the
application hears of any shutdown (the lifespan's ``shutdown`` comes last): a websocket run ends without its
terminal event. No uvicorn setting changes that. :class:`GracefulServer` is uvicorn's ``Server`` with one step
before its own shutdown: :meth:`yao_actors.aio.asgi.AsgiApp.drain`, the service's graceful shutdown — new runs refused,
the listener kept open for plain HTTP (``/healthz`` answers 503, so load balancers drain), the runs in flight given
``server.shutdown_grace`` seconds and then their terminal events, the websockets closed by the service (1001).
Only then does uvicorn go on (a second signal skips the wait, as uvicorn's own force-quit).

:func:`run` is ``uvicorn.run`` for it: ``run(app, yao, host=..., port=...)``, ``app`` being ``yao`` itself or the
application it is mounted in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
from typing import Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE

from yao_actors.aio.asgi import AsgiApp

#: uvicorn's own logger: what it says about its shutdown, this says beside it.
logger = logging.getLogger("uvicorn.error")


class GracefulServer(uvicorn.Server):
    """uvicorn's ``Server``, which lets ``yao``'s service drain before it closes connections (module docstring)."""

    def __init__(self, config: uvicorn.Config, yao: AsgiApp) -> None:
        super().__init__(config)
        self.yao = yao

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if not self.force_exit:
            grace = self.yao.config.service.shutdown_grace
            logger.info("Waiting for yao_actors runs to finish (server.shutdown_grace: %gs)", grace)
            draining = asyncio.ensure_future(self.yao.drain())
            while not (draining.done() or self.force_exit):
                await asyncio.wait([draining], timeout=0.1)  # a second signal sets force_exit: stop waiting
            if not draining.done():
                draining.cancel()
        await super().shutdown(sockets)


def run(app: Any, yao: AsgiApp, **options: Any) -> None:
    """Serve ``app`` (``yao``, or the application ``yao`` is mounted in) as ``uvicorn.run(app, **options)`` does in
    one process, with :class:`GracefulServer`: SIGINT ends it with 0, SIGTERM by the signal (uvicorn raises it again
    once shut down); a failed start exits with uvicorn's code for it."""
    server = GracefulServer(uvicorn.Config(app, **options), yao)
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)
