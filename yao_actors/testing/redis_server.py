"""A real ``redis-server`` for tests and benchmarks: a free loopback port, a folder of its own, started and stopped
on demand.

``RedisServer(folder).start()`` runs Debian's ``redis-server`` (``apt-get install redis-server``; this project's
``.ci/run`` installs it) bound to 127.0.0.1 and waits until it answers ``PING``; ``stop()`` ends it. With
``append_only`` (the default) every write is in its append-only file before it is acknowledged, so a stop and a
start keep the data, as the store's fault tests need; benchmarks turn it off (Redis's own default), as SQLite's
``synchronous = NORMAL`` does not sync every commit either. Used by this project's tests and benchmarks.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import attrs

REDIS_SERVER = shutil.which("redis-server")
"""The ``redis-server`` program on ``PATH``, or ``None`` when it is not installed."""

START_TIMEOUT = 10.0
"""Seconds a server may take to answer its first ``PING`` (or to stop)."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@attrs.define
class RedisServer:
    """One ``redis-server`` keeping its files in ``folder``, on ``port`` (a free one by default)."""

    folder: Path
    port: int = attrs.field(factory=free_port)
    append_only: bool = True
    _process: subprocess.Popen[bytes] | None = attrs.field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server and wait until it answers; ``RuntimeError`` when it is not installed or does not start."""
        if REDIS_SERVER is None:
            raise RuntimeError("redis-server is not installed (Debian: apt-get install redis-server)")
        arguments = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder)]
        arguments += ["--save", "", "--daemonize", "no"]
        if self.append_only:
            arguments += ["--appendonly", "yes", "--appendfsync", "always"]
        log = open(self.folder / "redis.log", "ab")  # noqa: SIM115 (the process keeps it open)
        self._process = subprocess.Popen(arguments, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as connection:
                    connection.sendall(b"PING\r\n")
                    if connection.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            assert self._process is not None
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                log = (self.folder / "redis.log").read_text(errors="replace")
                raise RuntimeError(f"redis-server did not start on port {self.port}:\n{log}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop the server (SIGTERM: it flushes its append-only file) and wait for it."""
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=START_TIMEOUT)
            self._process = None
