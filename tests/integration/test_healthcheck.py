"""The image's health check (``python -m yao_actors.healthcheck PID``) asks the service on the port it really listens
on, whatever chose it (issue 44, item 7): a real ``server.py`` on a port the system picked is healthy, a process that
listens but is not the service is not, nor is one that does not listen."""

from __future__ import annotations

import subprocess
import sys

import trio

from tests.integration.processes import REPO, clean_environment, end_process, server_py


async def healthcheck(pid: int) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [sys.executable, "-m", "yao_actors.healthcheck", str(pid)], cwd=REPO, capture_stderr=True, check=False
    )


async def test_the_health_check_finds_the_port_the_service_listens_on() -> None:
    with trio.fail_after(60):
        async with server_py("--port", "0", "--store", "memory", env=clean_environment()) as (process, banner):
            assert ":8765/" not in banner  # a port the system chose: nothing told the check
            answer = await healthcheck(process.pid)
    assert answer.returncode == 0, answer.stderr


async def test_a_process_that_is_not_the_service_is_not_healthy() -> None:
    """``python -m http.server`` listens, and answers ``/healthz`` 404; a process reading its stdin does not listen."""
    with trio.fail_after(60):
        web = await trio.lowlevel.open_process(
            [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"], stdout=subprocess.PIPE
        )
        quiet = await trio.lowlevel.open_process([sys.executable, "-c", "input()"], stdin=subprocess.PIPE)
        try:
            assert web.stdout is not None
            assert b"Serving HTTP" in await web.stdout.receive_some(200)  # it listens now
            listening = await healthcheck(web.pid)
            idle = await healthcheck(quiet.pid)
        finally:
            await end_process(web, None)
            await end_process(quiet, None)
    assert listening.returncode == 1
    assert b"is not healthy (127.0.0.1:" in listening.stderr
    assert idle.returncode == 1
    assert b"is not healthy (no listening socket)" in idle.stderr
