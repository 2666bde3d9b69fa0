"""What the service answers to plain HTTP on its port: the page, ``/healthz``, ``/readyz`` and ``/metrics``.

- ``GET /`` (or ``/index.html``): the browser page.
- ``GET /healthz``: ``200`` while serving, ``503`` once shutting down (the listener stays open through the
  shutdown grace so load balancers see it and drain).
- ``GET /readyz``: ``200`` when every configured MCP server is ready, else ``503``; the JSON body names each
  server's state and last error. ``503`` too while shutting down.
- ``GET /metrics``: the Prometheus text format (:mod:`yao_actors.observability.metrics`); when the service has
  tokens, only with ``Authorization: Bearer <token>`` (``401`` otherwise). Health endpoints are open.

Anything else is ``404``; a method other than ``GET`` or ``HEAD`` is ``405``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

import attrs
from prometheus_client import CONTENT_TYPE_LATEST

from yao_actors.observability.metrics import exposition
from yao_actors.server_handle import ServerState, ServerStatistics
from yao_actors.service.auth import Credential, Handshake, principal_of
from yao_actors.service.gate import HttpResponse, RequestHead

PAGE_PATHS: Final = frozenset({"/", "/index.html"})
JSON: Final = "application/json"


class Observable(Protocol):
    """A server whose health ``/readyz`` reports (a :class:`~yao_actors.server_handle.ServerHandle`)."""

    def statistics(self) -> ServerStatistics: ...


@attrs.frozen
class Endpoints:
    """The plain HTTP side of a service: ``page``, the ``servers`` whose readiness counts, who may read metrics."""

    page: bytes
    servers: Mapping[str, Observable]
    credentials: Sequence[Credential]
    closing: Callable[[], bool]

    def respond(self, head: RequestHead) -> HttpResponse:
        """The answer to one plain HTTP request."""
        if head.method not in ("GET", "HEAD"):
            return HttpResponse(405, b"method not allowed\n", headers=(("Allow", "GET, HEAD"),))
        path = head.path
        if path in PAGE_PATHS:
            return HttpResponse(200, self.page, "text/html; charset=utf-8")
        if path == "/healthz":
            return self.health()
        if path == "/readyz":
            return self.readiness()
        if path == "/metrics":
            return self.metrics(head)
        return HttpResponse(404, b"not found\n")

    def health(self) -> HttpResponse:
        if self.closing():
            return _json(503, {"status": "shutting_down"})
        return _json(200, {"status": "serving"})

    def readiness(self) -> HttpResponse:
        servers = {server_id: server.statistics() for server_id, server in self.servers.items()}
        report: dict[str, Any] = {
            server_id: {"state": stats.state.value, "last_error": stats.last_error}
            for server_id, stats in servers.items()
        }
        ready = all(stats.state is ServerState.READY for stats in servers.values())
        if self.closing():
            return _json(503, {"status": "shutting_down", "servers": report})
        return _json(200 if ready else 503, {"status": "ready" if ready else "not_ready", "servers": report})

    def metrics(self, head: RequestHead) -> HttpResponse:
        if self.credentials and principal_of(Handshake(head.headers), self.credentials) is None:
            return HttpResponse(401, b"missing or wrong bearer token\n", headers=(("WWW-Authenticate", "Bearer"),))
        return HttpResponse(200, exposition(), CONTENT_TYPE_LATEST)


def _json(status: int, value: Mapping[str, Any]) -> HttpResponse:
    return HttpResponse(status, json.dumps(value, ensure_ascii=False).encode() + b"\n", JSON)
