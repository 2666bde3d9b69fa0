"""An app's proxied MCP request (MCP Apps) as the service answers it, on ``POST /agui`` and in a websocket ``run``
frame: the two events ``@ag-ui/mcp-apps-middleware`` answers with, and no run.

A body (or frame) whose ``forwardedProps`` carries ``__proxiedMCPRequest: {serverId, method, params}`` asks for
no run: no model is asked and nothing is written to the thread. The answer is ``RUN_STARTED`` then
``RUN_FINISHED`` (both with the request's ``threadId`` and ``runId``), whose ``result`` is the MCP result, or
``{"error": "..."}`` saying why the request was refused
(:mod:`~yao_actors.conversation.app_requests`): what CopilotKit's renderer reads.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from yao_actors.conversation.app_requests import AppRequest, AppRequestRefused
from yao_actors.events import EventDict

logger = logging.getLogger(__name__)


class AppAnswerer(Protocol):
    """What answers an app's request: the runtime (``Runtime.app_request``)."""

    async def app_request(self, request: AppRequest, *, principal: str | None = None) -> dict[str, Any]: ...


async def proxied_answer(runtime: AppAnswerer, thread_id: str, proxied: Any, principal: str | None) -> dict[str, Any]:
    """The ``result`` of the ``RUN_FINISHED`` answering an app's request: the MCP result, or ``{"error"}``.

    The store out of reach is ``RunError`` ``store_unavailable`` (the caller answers it as it answers a run's)."""
    try:
        request = AppRequest.of(thread_id, proxied)
        return await runtime.app_request(request, principal=principal)
    except AppRequestRefused as refused:
        logger.info("refused an app's request: %s", refused, extra={"principal": principal, "thread_id": thread_id})
        return {"error": str(refused)}


def proxy_events(thread_id: str, run_id: str, result: dict[str, Any]) -> tuple[EventDict, EventDict]:
    """``RUN_STARTED`` and ``RUN_FINISHED`` (with ``result``), as the middleware answers a proxied request."""
    ids = {"threadId": thread_id, "runId": run_id}
    return {"type": "RUN_STARTED", **ids}, {"type": "RUN_FINISHED", **ids, "result": result}
