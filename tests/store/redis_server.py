"""A real ``redis-server`` for the tests: a free loopback port, a temporary folder, started and stopped on demand."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import attrs
import pytest

REDIS_SERVER = shutil.which("redis-server")
START_TIMEOUT = 10.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@attrs.define
class RedisServer:
    """One ``redis-server`` with append-only persistence in ``folder``, so a stop and start keep its data."""

    folder: Path
    port: int = attrs.field(factory=free_port)
    _process: subprocess.Popen[bytes] | None = attrs.field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        if REDIS_SERVER is None:
            pytest.skip("redis-server is not installed (.ci/run installs it)")
        arguments = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder)]
        arguments += ["--save", "", "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no"]
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
                log = (self.folder / "redis.log").read_text(errors="replace")
                raise RuntimeError(f"redis-server did not start on port {self.port}:\n{log}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop the server (SIGTERM: it flushes its append-only file) and wait for it."""
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=START_TIMEOUT)
            self._process = None
