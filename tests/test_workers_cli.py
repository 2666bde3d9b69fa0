"""``serve --workers``: refused without a store the workers can share, the port they share, how a worker ends."""

from __future__ import annotations

import signal
import socket
import sys

import pytest
import trio

from yao_actors.cli import main
from yao_actors.cli.workers import (
    BACKOFF_INITIAL,
    BACKOFF_MAX,
    Supervisor,
    Worker,
    reserve_port,
    reuse_port_listener,
)


def test_more_than_one_worker_needs_a_shared_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--workers", "2", "--store", "memory"]) == 2
    error = capsys.readouterr().err
    assert "--workers 2" in error
    assert "'sqlite'" in error
    assert "'redis'" in error


def test_the_supervisor_backs_off_by_the_documented_defaults() -> None:
    supervisor = Supervisor(["true"], 1)
    assert (supervisor.backoff_initial, supervisor.backoff_max) == (BACKOFF_INITIAL, BACKOFF_MAX) == (0.5, 30.0)


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


# Stand-in workers (real processes): they print a banner once "serving", as `serve` does, or never.
NEVER_SERVES = "import time; time.sleep(60)"
SERVES_THEN_DIES_ON_SIGTERM = "import time; print('ws://127.0.0.1:1/', flush=True); time.sleep(60)"
SERVES_THEN_STOPS_WELL = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); "
    "print('ws://127.0.0.1:1/', flush=True); time.sleep(60)"
)


async def _stop_when(supervisor: Supervisor, serving: bool) -> Worker:
    """Run ``supervisor`` (one worker), stop it once its worker is started (``serving``: and has printed its banner)."""
    worker = supervisor.workers[0]
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(supervisor.serve)
            while worker.process is None or (serving and not worker.serving):  # noqa: ASYNC110
                await trio.sleep(0.01)
            supervisor.stop()
    return worker


async def test_a_worker_stopped_while_it_was_starting_ended_well() -> None:
    # CI saw the parent exit 1 when SIGTERM reached a worker it had just restarted, still loading.
    worker = await _stop_when(Supervisor([sys.executable, "-c", NEVER_SERVES], 1), serving=False)
    assert worker.process is not None
    assert worker.process.returncode == -signal.SIGTERM
    assert not worker.serving
    assert worker.ended_well()


async def test_a_serving_worker_ends_well_only_if_it_exits_zero() -> None:
    dies = await _stop_when(Supervisor([sys.executable, "-c", SERVES_THEN_DIES_ON_SIGTERM], 1), serving=True)
    assert dies.serving
    assert not dies.ended_well()
    stops = await _stop_when(Supervisor([sys.executable, "-c", SERVES_THEN_STOPS_WELL], 1), serving=True)
    assert stops.process is not None
    assert stops.process.returncode == 0
    assert stops.ended_well()


SERVES_THEN_EXITS_1 = "import sys; print('ws://127.0.0.1:1/', flush=True); sys.exit(1)"
SERVES_A_WHILE_THEN_EXITS_1 = "import sys, time; print('ws://127.0.0.1:1/', flush=True); time.sleep(0.3); sys.exit(1)"


async def _backoffs(supervisor: Supervisor, restarts: int, caplog: pytest.LogCaptureFixture) -> list[float]:
    """The delays ``supervisor`` (one crashing worker) waited before each of its first ``restarts`` restarts."""
    worker = supervisor.workers[0]
    with caplog.at_level("WARNING", logger="yao_actors.cli.workers"), trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(supervisor.serve)
            while worker.restarts < restarts:  # noqa: ASYNC110
                await trio.sleep(0.01)
            supervisor.stop()
    delays = [r.args[3] for r in caplog.records if "restarting it in" in r.msg]  # type: ignore[index]
    assert all("exited with code 1" in r.getMessage() for r in caplog.records if "restarting" in r.msg)
    return delays[:restarts]


async def test_a_worker_that_keeps_dying_is_restarted_after_a_doubling_backoff_up_to_its_cap(
    caplog: pytest.LogCaptureFixture,
) -> None:
    command = [sys.executable, "-c", SERVES_THEN_EXITS_1]
    # healthy_after: no death here counts as one after a healthy life.
    supervisor = Supervisor(command, 1, backoff_initial=0.01, backoff_max=0.04, healthy_after=600)
    assert await _backoffs(supervisor, 5, caplog) == [0.01, 0.02, 0.04, 0.04, 0.04]


async def test_a_worker_that_lived_long_enough_is_restarted_after_the_initial_backoff_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    command = [sys.executable, "-c", SERVES_A_WHILE_THEN_EXITS_1]
    supervisor = Supervisor(command, 1, backoff_initial=0.01, healthy_after=0.2)  # each lives 0.3 s at least
    assert await _backoffs(supervisor, 3, caplog) == [0.01, 0.01, 0.01]
