"""Health, readiness and metrics on the service's port: ``/healthz``, ``/readyz``, ``/metrics``.

- ``GET /healthz``: ``200`` while serving, ``503`` once shutting down (the listener stays open through the
  shutdown grace so load balancers see it and drain).
- ``GET /readyz``: ``200`` when this worker can take runs: the conversation store can take calls, no server is in
  its first start, every *required* server (``server.required_servers``) is ready, and the service is not shutting
  down; else ``503``. A server that is down and not required does not make the worker unready (every worker
  shares the same third-party servers, so a load balancer pulling them all for one would serve nobody): its runs
  go on without that server's tools. The JSON body names each server's state and the kind of its last error
  (``exited``, ``unreachable``, ``unauthorized``), lists the servers not ready (``servers_not_ready``), and has
  ``"store": "unavailable"`` while the store cannot. The error itself (the last lines
  of a stdio server's stderr, which may hold secrets) goes to the log, and to ``/readyz`` only for a request
  bearing one of the service's tokens (never when the service has none). ``503`` too while shutting down.
  A restarting server's entry has ``next_attempt_in`` (seconds). ``tools_not_offered`` names, by assistant, the servers whose tools its ``max_tools`` cap leaves out, and which
  (present only when some are; it does not change readiness).
- ``GET /metrics``: the Prometheus text format (:mod:`yao_actors.observability.metrics`); when the service has
  tokens, only with ``Authorization: Bearer <token>`` (``401`` otherwise). Health endpoints are open.

:meth:`Endpoints.add_to` puts them on the service's :class:`~yao_actors.service.http.Routes` (``GET`` and
``HEAD``; the routes answer 404 and 405).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs
from prometheus_client import CONTENT_TYPE_LATEST

from yao_actors.observability.metrics import exposition
from yao_actors.service.auth import Credential, Handshake, principal_of
from yao_actors.service.http import Exchange, Routes
from yao_actors.tools.tool_server import ServerState, ServerStatistics


class Observable(Protocol):
    """A server whose health ``/readyz`` reports (a :class:`~yao_actors.tools.server_handle.ServerHandle`)."""

    def statistics(self) -> ServerStatistics: ...


@attrs.frozen
class Endpoints:
    """The ``servers`` ``/readyz`` reports (those in ``required`` must be ready), who may read the metrics, and
    whether the service is closing."""

    servers: Mapping[str, Observable]
    credentials: Sequence[Credential]
    closing: Callable[[], bool]
    required: frozenset[str] = frozenset()
    """The servers without which the worker is not ready (``server.required_servers``)."""
    store_problem: Callable[[], str | None] = lambda: None
    """Why the conversation store cannot take calls now (``None``: it can); not ready while it cannot."""
    not_offered: Callable[[], Awaitable[Mapping[str, Mapping[str, str]]]] | None = None
    """By assistant, why tools of a server are not offered (:meth:`~yao_actors.runtime.Runtime.tools_not_offered`)."""

    def add_to(self, routes: Routes) -> None:
        routes.add("/healthz", self.health)
        routes.add("/readyz", self.readiness)
        routes.add("/metrics", self.metrics)

    async def health(self, exchange: Exchange) -> None:
        if self.closing():
            await exchange.respond_json(503, {"status": "shutting_down"})
        else:
            await exchange.respond_json(200, {"status": "serving"})

    async def readiness(self, exchange: Exchange) -> None:
        servers = {server_id: server.statistics() for server_id, server in self.servers.items()}
        report: dict[str, Any] = {
            server_id: {"state": stats.state.value, "error": stats.last_error_kind, "protocol": stats.protocol}
            for server_id, stats in servers.items()
        }
        for server_id, stats in servers.items():
            if stats.next_attempt_in is not None:  # restarting: when it tries again
                report[server_id]["next_attempt_in"] = round(stats.next_attempt_in, 1)
        if self._authorized(exchange):
            for server_id, stats in servers.items():
                report[server_id]["last_error"] = stats.last_error
        store_ok = self.store_problem() is None  # the reason goes to the runs' errors, not here
        not_ready = [server_id for server_id, stats in servers.items() if stats.state is not ServerState.READY]
        ready = store_ok and not any(self._holds_back(server_id, servers[server_id]) for server_id in not_ready)
        if self.closing():
            await exchange.respond_json(503, {"status": "shutting_down", "servers": report})
        else:
            status: dict[str, Any] = {"status": "ready" if ready else "not_ready", "servers": report}
            if not_ready:
                status["servers_not_ready"] = not_ready
            if not store_ok:
                status["store"] = "unavailable"
            if self.not_offered is not None and (not_offered := await self.not_offered()):
                status["tools_not_offered"] = not_offered
            await exchange.respond_json(200 if ready else 503, status)

    def _holds_back(self, server_id: str, stats: ServerStatistics) -> bool:
        """Whether a server that is not ready keeps the worker from taking runs: a required one, or any in its first
        start (a worker that just started waits for its servers' first connection before it takes runs)."""
        first_start = stats.state is ServerState.STARTING and stats.restarts == 0 and stats.last_error is None
        return server_id in self.required or first_start

    def _authorized(self, exchange: Exchange) -> bool:
        """Whether the request bears one of the service's tokens (a service without tokens has none to bear)."""
        return (
            bool(self.credentials) and principal_of(Handshake(exchange.request.headers), self.credentials) is not None
        )

    async def metrics(self, exchange: Exchange) -> None:
        if self.credentials and not self._authorized(exchange):
            body = b"missing or wrong bearer token\n"
            await exchange.respond(401, body, "text/plain; charset=utf-8", [("www-authenticate", "Bearer")])
        else:
            await exchange.respond(200, exposition(), CONTENT_TYPE_LATEST)
