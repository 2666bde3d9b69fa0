"""An ASGI process for the tests: the ASGI application alone under uvicorn (its own lifespan, the service's graceful
shutdown: :mod:`yao_actors.asgi_server`), a ``/stats`` application beside it reporting the stdio test server's
counts, and ``/release`` to let a held model call answer.

Its assistant calls a 30-second tool of the stdio test server; asked ``hold``, it waits for ``/release`` instead and
then answers ``released``. ``python -m tests.integration.asgi_slow_app`` serves on ``PORT`` (0: a free one, printed by
uvicorn), with ``BODY_TIMEOUT`` seconds for a request to arrive whole (the service's own deadline by default).
"""

from __future__ import annotations

import json
import os
from typing import Any

import trio

import yao_actors.asgi
from yao_actors.asgi_server import run
from yao_actors.config import AssistantSpec, Config, ServerRef
from yao_actors.models.base import Completion, ToolCall
from yao_actors.service.frontend import HANDSHAKE_TIMEOUT
from yao_actors.testing import FunctionModel, stdio_test_server

RELEASED = trio.Event()


async def _slow_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] == "user" and messages[-1]["content"] == "hold":
        await RELEASED.wait()
        return "released"
    if messages[-1]["role"] == "user":
        return Completion(tool_calls=(ToolCall("slow", "s1__sleep", '{"seconds": 30}'),))
    return "done"


async def _release() -> None:
    RELEASED.set()


CONFIG = Config(
    servers={"s1": stdio_test_server("s1")},
    assistants={"default": AssistantSpec(id="default", model="m", servers=(ServerRef("s1"),))},
)
yao = yao_actors.asgi.app(
    CONFIG,
    models={"m": FunctionModel(_slow_model)},
    body_timeout=float(os.environ.get("BODY_TIMEOUT", HANDSHAKE_TIMEOUT)),
)


async def _json(send: Any, value: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(value).encode()})


async def app(scope: Any, receive: Any, send: Any) -> None:
    """``GET /stats``: the test server's ``stats`` tool through the asyncio runtime; ``POST /release``: the held
    model call answers; anything else: ``yao``."""
    if scope["type"] == "http" and scope["path"] == "/stats" and yao.runtime is not None:
        outcome = await yao.runtime.servers["s1"].call_tool("stats", {})
        await _json(send, outcome.result)
    elif scope["type"] == "http" and scope["path"] == "/release" and yao.runtime is not None:
        await yao.runtime.guest.call(_release)
        await _json(send, {"released": True})
    else:
        await yao(scope, receive, send)


if __name__ == "__main__":
    run(app, yao, host="127.0.0.1", port=int(os.environ.get("PORT", "0")))
