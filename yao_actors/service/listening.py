"""Listening on TCP: the sockets, and serving a runtime on them until the block ends or someone shuts it down.

Two ownership levels, as in trio's own servers (the third, :func:`~yao_actors.service.frontend.open_front`, serves
connections an ASGI server hands it and listens on nothing):

- :func:`open_service` — an async context manager that listens and serves until its block ends, then shuts
  down gracefully (:meth:`~yao_actors.service.frontend.Service.shutdown`); leaving by an exception or a
  cancellation stops at once.
- :func:`serve_service` — for ``nursery.start``: serves until cancelled, or until someone calls
  :meth:`~yao_actors.service.frontend.Service.shutdown` on the handle it reports.

:func:`open_listeners` opens the sockets (a worker of ``serve --workers`` is handed its own instead).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import trio

from yao_actors.config import ServiceSpec
from yao_actors.errors import ListenError
from yao_actors.service.auth import check_listen, check_port, resolve_credentials
from yao_actors.service.frontend import Service, open_front
from yao_actors.service.http_endpoints import Observable
from yao_actors.service.served import ServedRuntime


@asynccontextmanager
async def open_service(
    runtime: ServedRuntime,
    spec: ServiceSpec,
    *,
    servers: Mapping[str, Observable] | None = None,
    listeners: list[trio.SocketListener] | None = None,
) -> AsyncIterator[Service]:
    """Listen on ``spec.host:spec.port`` and serve ``runtime`` until the block ends, then shut down gracefully.

    Refuses (:class:`~yao_actors.errors.ConfigError`) to listen beyond loopback without a token. Port 0 picks
    a free port; read it from :attr:`Service.port`. ``/readyz`` reports ``servers`` (by default the
    runtime's own). ``listeners``, when given, are listened on instead (a worker's
    ``SO_REUSEPORT`` socket, :mod:`yao_actors.cli.workers`).

    Resource handling:

      The service's nursery holds the listener and one task per connection (a websocket, or one HTTP
      request such as ``POST /agui``), and waits there for detached runs to end. Leaving the block normally
      shuts down gracefully (:meth:`Service.shutdown`: no new run, runs in flight get ``shutdown_grace``
      seconds, then are cancelled and still send their terminal events, every websocket closes with 1001);
      leaving by an exception or a cancellation stops everything at once. The runtime is the caller's: the
      service neither starts nor stops it.

    Error handling:

      :class:`~yao_actors.errors.ConfigError` before listening (beyond loopback without a token, a port out
      of range), :class:`~yao_actors.errors.ListenError` when the system refuses the address. Once serving,
      nothing a client sends ends the service: a refused frame or request gets its error, a connection whose
      handler fails is logged and closed (1011), and a run's failure is that run's ``RUN_ERROR``.
    """
    check_listen(spec.host, resolve_credentials(spec))
    if listeners is None:
        listeners = await open_listeners(spec.host, spec.port)
    port = listeners[0].socket.getsockname()[1]
    async with open_front(runtime, spec, servers=servers, port=port) as service:
        service._nursery.start_soon(service._serve_listeners, listeners)
        yield service


async def open_listeners(host: str, port: int) -> list[trio.SocketListener]:
    """Listening sockets on ``host:port`` (port 0: a free one).

    Raises :class:`~yao_actors.errors.ConfigError` for a port outside 0-65535 (the system would take it modulo
    65536 and listen elsewhere without a word) and :class:`~yao_actors.errors.ListenError` when the system refuses
    (the port is in use, the address is not this machine's, the name does not resolve).
    """
    check_port(port)
    try:
        return await trio.open_tcp_listeners(port, host=host)
    except OSError as error:
        raise ListenError.from_os_error(host, port, error) from None


async def serve_service(
    runtime: ServedRuntime,
    spec: ServiceSpec,
    *,
    servers: Mapping[str, Observable] | None = None,
    listeners: list[trio.SocketListener] | None = None,
    task_status: trio.TaskStatus[Service] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled (stops at once) or until :meth:`Service.shutdown` is called on the reported handle.

    ``servers`` and ``listeners`` as for :func:`open_service`.
    """
    async with open_service(runtime, spec, servers=servers, listeners=listeners) as service:
        task_status.started(service)
        await service.wait_stopped()
