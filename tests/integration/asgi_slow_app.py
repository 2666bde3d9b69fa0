"""An ASGI process for the tests: the ASGI application alone under uvicorn (its own lifespan), its assistant calling
a 30-second tool of the stdio test server, and a ``/stats`` application beside it reporting that server's counts.

``python -m tests.integration.asgi_slow_app`` serves on ``PORT`` (0: a free one, printed by uvicorn).
"""

from __future__ import annotations

import json
import os
from typing import Any

import uvicorn

import yao_actors.asgi
from yao_actors.config import AssistantSpec, Config, ServerRef
from yao_actors.models.base import Completion, ToolCall
from yao_actors.testing import FunctionModel, stdio_test_server


def _slow_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] == "user":
        return Completion(tool_calls=(ToolCall("slow", "s1__sleep", '{"seconds": 30}'),))
    return "done"


CONFIG = Config(
    servers={"s1": stdio_test_server("s1")},
    assistants={"default": AssistantSpec(id="default", model="m", servers=(ServerRef("s1"),))},
)
yao = yao_actors.asgi.app(CONFIG, models={"m": FunctionModel(_slow_model)})


async def app(scope: Any, receive: Any, send: Any) -> None:
    """``GET /stats``: the test server's ``stats`` tool through the asyncio runtime; anything else: ``yao``."""
    if scope["type"] == "http" and scope["path"] == "/stats" and yao.runtime is not None:
        outcome = await yao.runtime.servers["s1"].call_tool("stats", {})
        body = json.dumps(outcome.result).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
    else:
        await yao(scope, receive, send)


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "0")))
