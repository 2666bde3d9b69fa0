"""``yao-actors serve --workers N``: N worker processes on one port, started, restarted and stopped by a parent.

Each worker is a whole ``yao-actors serve`` (its own runtime, MCP server actors and store connection) that
listens with ``SO_REUSEPORT`` on the same port, so the kernel spreads new connections over them. The parent
only supervises: it starts the workers, restarts one that dies (after a backoff that grows while it keeps
dying), forwards SIGINT/SIGTERM (each worker shuts down gracefully, as a single process does; a second signal
kills them) and exits once all have exited. Threads are shared through the store (SQLite on one machine,
Redis across machines), whose thread leases keep one run of a thread at a time (:mod:`yao_actors.store.leases`).

    parent ──spawn──▶ worker 1 ─┐
           ──spawn──▶ worker 2 ─┼── SO_REUSEPORT listeners on host:port ◀── clients (or HAProxy)
           ──spawn──▶ worker N ─┘
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence

import attrs
import trio

from yao_actors.errors import ListenError
from yao_actors.service.auth import check_port
from yao_actors.testing.processes import read_line

logger = logging.getLogger(__name__)

BACKOFF_INITIAL = 0.5
"""Seconds before restarting a worker that died; doubled for each death in a row, up to :data:`BACKOFF_MAX`."""

BACKOFF_MAX = 30.0

HEALTHY_AFTER = 60.0
"""Seconds a worker must have lived for its next death to restart it after :data:`BACKOFF_INITIAL` again."""

START_TIMEOUT = 120.0
"""Seconds a worker may take to print its banner (its MCP servers start first) before it counts as dead."""


def reuse_port_listener(host: str, port: int, *, backlog: int = 128) -> trio.SocketListener:
    """A listening socket on ``host:port`` with ``SO_REUSEPORT``: other processes may listen on the same port.

    Raises :class:`~yao_actors.errors.ListenError` (or ``ConfigError`` for a port outside 0-65535) as
    :func:`~yao_actors.service.listening.open_listeners` does.
    """
    sock = _reuse_port_socket(host, port, v6_only=True)
    try:
        sock.listen(backlog)
    except OSError as error:
        sock.close()
        raise ListenError.from_os_error(host, port, error) from None
    return trio.SocketListener(trio.socket.from_stdlib_socket(sock))


def reserve_port(host: str, port: int) -> socket.socket:
    """A socket bound (not listening) with ``SO_REUSEPORT`` to ``host:port``, port 0 picking a free one: it
    keeps the port for the workers, which join it, until the parent closes it. Raises as
    :func:`reuse_port_listener` does."""
    return _reuse_port_socket(host, port, v6_only=False)


def _reuse_port_socket(host: str, port: int, *, v6_only: bool) -> socket.socket:
    """A socket bound to ``host:port`` with ``SO_REUSEPORT`` (``v6_only``: an IPv6 socket takes no IPv4)."""
    check_port(port)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as error:
        raise ListenError.from_os_error(host, port, error) from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if v6_only and family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
    except OSError as error:
        sock.close()
        raise ListenError.from_os_error(host, port, error) from None
    except BaseException:
        sock.close()
        raise
    return sock


class WorkerFailed(Exception):
    """A worker exited before it served at all (its log on standard error says why)."""


@attrs.define(eq=False)
class Worker:
    """One worker slot: the process serving in it now, and how often it had to be restarted."""

    index: int
    process: trio.Process | None = None
    restarts: int = 0
    banner: str = ""
    #: The process in the slot now has printed its banner (it serves); one stopped before that has not.
    serving: bool = False

    def ended_well(self) -> bool:
        """The slot's last process exited 0, or was stopped by SIGTERM before it served (stopped while starting)."""
        code = None if self.process is None else self.process.returncode
        return code == 0 or (code == -signal.SIGTERM and not self.serving)


@attrs.define(eq=False)
class Supervisor:
    """Starts ``count`` workers with ``command`` and keeps them running until :meth:`stop`."""

    command: Sequence[str]
    count: int
    backoff_initial: float = BACKOFF_INITIAL
    backoff_max: float = BACKOFF_MAX
    healthy_after: float = HEALTHY_AFTER
    workers: list[Worker] = attrs.field(init=False)
    stopping: bool = False
    #: Every worker serves, or :meth:`stop` came first.
    _settled: trio.Event = attrs.field(factory=trio.Event, init=False)

    def __attrs_post_init__(self) -> None:
        self.workers = [Worker(i + 1) for i in range(self.count)]

    async def serve(self, *, task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
        """Start every worker, report their banners once all are serving, and keep them running until stopped.

        Stopped before every worker served, it reports nothing and returns once they have exited.
        """
        banners: dict[int, str] = {}

        def ready(worker: Worker, banner: str) -> None:
            banners[worker.index] = banner
            if len(banners) == self.count:
                self._settled.set()

        async with trio.open_nursery() as nursery:
            for worker in self.workers:  # all at once: each starts its own MCP servers first
                nursery.start_soon(self._keep, worker, ready)
            await self._settled.wait()
            if not self.stopping:
                task_status.started([banners[index] for index in sorted(banners)])

    async def _keep(self, worker: Worker, ready: Callable[[Worker, str], None]) -> None:
        """Run the worker in its slot, restarting it with backoff whenever it dies, until the parent stops."""
        backoff = self.backoff_initial
        reported = False
        while not self.stopping:
            started_at = trio.current_time()
            process = await trio.lowlevel.open_process(list(self.command), stdout=subprocess.PIPE)
            worker.process, worker.serving = process, False
            if self.stopping:  # stopped while it was being started
                process.send_signal(signal.SIGTERM)
            assert process.stdout is not None
            banner = ""
            with trio.move_on_after(START_TIMEOUT), contextlib.suppress(EOFError):
                banner = await read_line(process.stdout)
            if banner:
                worker.banner, worker.serving = banner, True
                logger.info("worker %d started (pid %d)", worker.index, process.pid)
                if not reported:
                    reported = True
                    ready(worker, banner)
            elif self.stopping:
                logger.info("worker %d (pid %d) was stopped while starting", worker.index, process.pid)
            else:
                logger.error("worker %d (pid %d) did not start; stopping it", worker.index, process.pid)
                process.kill()
            async with trio.open_nursery() as drain:
                drain.start_soon(_drain, process.stdout)
                code = await process.wait()
            if self.stopping:
                return
            if not reported:
                raise WorkerFailed(f"worker {worker.index} could not start: it exited with {_how(code)}")
            if trio.current_time() - started_at > self.healthy_after:
                backoff = self.backoff_initial
            logger.warning(
                "worker %d (pid %d) exited with %s; restarting it in %g s",
                worker.index,
                process.pid,
                _how(code),
                backoff,
            )
            await trio.sleep(backoff)
            backoff = min(backoff * 2, self.backoff_max)
            worker.restarts += 1

    def stop(self, *, sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` to every worker still running (SIGTERM: shut down gracefully) and restart none."""
        self.stopping = True
        self._settled.set()
        for worker in self.workers:
            process = worker.process
            if process is not None and process.returncode is None:
                process.send_signal(sig)


async def _drain(stream: trio.abc.ReceiveStream) -> None:
    """Read (and forget) what a worker writes to its standard output after its banner, until it exits."""
    while await stream.receive_some(65536):
        pass


def _how(code: int) -> str:
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"code {code}"


async def serve_workers(command: Sequence[str], count: int, on_ready: Callable[[list[str]], None]) -> int:
    """Supervise ``count`` workers running ``command`` until SIGINT/SIGTERM; the exit code (0: all ended well,
    2: a worker could not start, and the others were stopped).

    ``on_ready`` gets the workers' banners once every one of them is serving. A first signal stops the workers
    gracefully; a second kills them.
    """
    supervisor = Supervisor(command, count)
    code = 2
    try:
        code = await _supervise(supervisor, on_ready)
    except* WorkerFailed as failed:
        logger.error("%s", failed.exceptions[0])
        supervisor.stop()
        with trio.CancelScope(shield=True):
            await _all_exited(supervisor)
    return code


async def _supervise(supervisor: Supervisor, on_ready: Callable[[list[str]], None]) -> int:
    count = supervisor.count
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            banners = await nursery.start(supervisor.serve)
            on_ready(banners)
            async for _ in signals:
                logger.info("stopping %d worker(s)", count)
                supervisor.stop()
                break
            nursery.start_soon(_kill_on_second_signal, signals, supervisor)
            # The nursery waits for every worker to exit; then the signal watcher is cancelled.
            await _all_exited(supervisor)
            nursery.cancel_scope.cancel()
    return 0 if all(worker.ended_well() for worker in supervisor.workers) else 1


async def _all_exited(supervisor: Supervisor) -> None:
    for worker in supervisor.workers:
        if worker.process is not None:
            await worker.process.wait()


async def _kill_on_second_signal(signals: AsyncIterator[int], supervisor: Supervisor) -> None:
    async for _ in signals:
        logger.warning("second signal: killing the workers")
        supervisor.stop(sig=signal.SIGKILL)
        return


def worker_command(argv: Sequence[str]) -> list[str]:
    """The command line of one worker: ``yao-actors serve`` with ``argv`` (which sets the port), in this Python."""
    return [sys.executable, "-m", "yao_actors.cli", "serve", *argv]
