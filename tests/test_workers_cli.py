"""``serve --workers``: refused without a store the workers can share, and the port they share."""

from __future__ import annotations

import socket

import pytest

from yao_actors.cli import main
from yao_actors.service.workers import reserve_port, reuse_port_listener


def test_more_than_one_worker_needs_a_shared_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--workers", "2", "--store", "memory"]) == 2
    error = capsys.readouterr().err
    assert "--workers 2" in error
    assert "'sqlite'" in error
    assert "'redis'" in error


def test_workers_must_be_at_least_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--workers", "0", "--store", "memory"]) == 2
    assert "--workers: expected a number of worker processes >= 1, got 0" in capsys.readouterr().err


async def test_workers_listen_on_one_reserved_port_and_each_accepts_connections() -> None:
    with reserve_port("127.0.0.1", 0) as reserved:
        port = reserved.getsockname()[1]
        first = reuse_port_listener("127.0.0.1", port)
        second = reuse_port_listener("127.0.0.1", port)
        try:
            assert first.socket.getsockname()[1] == second.socket.getsockname()[1] == port
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass  # accepted by the kernel into one of the two listeners' queues (never the reservation)
            with pytest.raises(OSError, match="in use"), socket.socket() as plain:
                plain.bind(("127.0.0.1", port))  # without SO_REUSEPORT the port is taken
        finally:
            await first.aclose()
            await second.aclose()
