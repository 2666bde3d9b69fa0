"""Who gets a run in a real ``server.py`` process: clients that never read, and clients that start runs and drop,
never keep the service's run slots from everyone else.

The model is the fake OpenAI endpoint on loopback; the clients are real sockets (the stalled ones with receive
buffers the kernel fills).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from tests.integration.processes import clean_environment, server_py
from tests.service.agui_support import post_agui, run_input, stalled_agui
from tests.service.support import http_request, receive, run_frame, send
from yao_actors.cli.chat import open_service_connection
from yao_actors.testing import Reply, open_fake_openai
from yao_actors.testing.fake_openai import RecordedRequest

#: Text far larger than any socket buffer on the way, in 64 KiB deltas.
FLOOD = "x" * (8 << 20)


def _reply(request: RecordedRequest) -> Reply:
    """``flood`` is answered with :data:`FLOOD`, ``stall`` never finishes, anything else is a short text."""
    last = request.body["messages"][-1]
    if last["content"] == "flood":
        return Reply(text=FLOOD, chunk_size=65536)
    if last["content"] == "stall":
        return Reply(text="never finished", stall_after=1)
    return Reply(text=f"saw: {last['content']}")


@asynccontextmanager
async def _service(tmp_path: Path, server: dict[str, Any], *, run_timeout: float = 2) -> AsyncIterator[int]:
    """``server.py`` with the fake model, the run deadline, the memory store and ``server``; yields its port."""
    async with open_fake_openai(_reply) as fake:
        timeouts = {"run": run_timeout, "model": run_timeout}
        config = {
            "models": {"fake": {"provider": "openai", "base_url": fake.base_url, "model": "fake", "api_key_env": None}},
            "assistants": {"default": {"model": "fake", "timeouts": timeouts}},
            "server": server,
            "store": {"type": "memory"},
        }
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        async with server_py("--config", str(path), "--port", "0", env=clean_environment()) as (_, banner):
            match = re.search(r"ws://127\.0\.0\.1:(\d+)/", banner)
            assert match, banner
            yield int(match.group(1))


async def _metrics(port: int, headers: dict[str, str] | None = None) -> str:
    """The process's ``/metrics``."""
    return (await http_request(port, "/metrics", headers=headers)).body.decode()


async def _gauge(port: int, name: str, headers: dict[str, str] | None = None) -> float:
    """Gauge ``name`` (``yao_active_runs``, ``yao_run_slots_held``) as the process's ``/metrics`` says."""
    found = re.search(rf"^{name} (\S+)$", await _metrics(port, headers), re.MULTILINE)
    return float(found.group(1))  # type: ignore[union-attr]


async def _ended_runs(port: int) -> dict[str, float]:
    """``yao_runs_total`` by outcome, as the process's ``/metrics`` says (runs that ended: an admitted run only)."""
    metrics = await _metrics(port)
    found = re.findall(r'^yao_runs_total\{assistant="default",outcome="(\w+)"\} (\S+)$', metrics, re.MULTILINE)
    return {outcome: float(count) for outcome, count in found}


async def test_clients_that_never_read_do_not_keep_the_slots_once_their_runs_ended(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with _service(tmp_path, {"max_runs": 4, "idle_timeout": 3600}) as port, AsyncExitStack() as stalled:
            for n in range(4):
                body = run_input("flood", thread_id=f"stalled-{n}", run_id=f"stalled-{n}")
                await stalled.enter_async_context(stalled_agui(port, body))
            # Each run is admitted, fills its client's socket, meets its 2-second deadline and ends, each at its
            # own time (not necessarily while another is still in flight): waited for as the four runs counted
            # ended, which only admitted runs are. The four clients have not read a byte, and their connections
            # stay open (idle_timeout is an hour).
            while sum((await _ended_runs(port)).values()) < 4:  # noqa: ASYNC110 -- another process
                await trio.sleep(0.05)
            assert await _ended_runs(port) == {"error": 4}
            assert await _gauge(port, "yao_active_runs") == 0  # counted ended as it stopped counting active
            # A slot is given back a few steps after its run stops counting active: waited for. Slots the four
            # clients kept (their connections stay open) would never come back and fail the guard above.
            while await _gauge(port, "yao_run_slots_held") > 0:  # noqa: ASYNC110 -- another process
                await trio.sleep(0.05)
            # With every slot free, a fifth run is admitted at once.
            response = await post_agui(port, run_input("hello", thread_id="fifth", run_id="fifth"))
            assert response.status == 200, response.json()
    assert response.events[-1]["type"] == "RUN_FINISHED"
    assert response.events[-1]["result"]["text"] == "saw: hello"


MALLORY = "mallory-token-of-16+"
ALICE = "alice-token-of-16+!"


async def _start_runs_and_drop(port: int, round_: int) -> list[str]:
    """mallory's round: a connection's worth of runs (8) that never finish, then gone once each is answered;
    returns the refusals' messages."""
    refusals = []
    async with open_service_connection(f"ws://127.0.0.1:{port}/", token=MALLORY) as ws:
        run_ids = {f"m{round_}-{n}" for n in range(8)}
        for run_id in sorted(run_ids):
            await send(ws, run_frame("stall", run_id=run_id))
        while run_ids:
            frame = await receive(ws)
            if frame["type"] in ("RUN_STARTED", "RUN_ERROR"):
                run_ids.discard(frame["runId"])
            if frame["type"] == "RUN_ERROR":
                refusals.append(frame["message"])
    return refusals


async def test_a_principal_that_starts_runs_and_drops_never_locks_another_out(tmp_path: Path) -> None:
    server = {"tokens": {"mallory": MALLORY, "alice": ALICE}, "max_runs": 4, "detach_grace": 600}
    refusals: list[str] = []
    answered: list[tuple[int, Any]] = []
    with trio.fail_after(90):
        async with _service(tmp_path, server, run_timeout=600) as port, trio.open_nursery() as attack:

            async def keep_attacking() -> None:
                for round_ in range(1000):
                    refusals.extend(await _start_runs_and_drop(port, round_))
                    await trio.sleep(0.2)

            attack.start_soon(keep_attacking)
            while len(refusals) < 8 + 7:  # noqa: ASYNC110 -- two rounds: her run goes on, detached
                await trio.sleep(0.05)
            headers = {"authorization": f"Bearer {ALICE}"}
            for n in range(10):  # by POST /agui while mallory keeps going
                body = run_input(f"question {n}", thread_id=f"a{n}", run_id=f"a{n}")
                response = await post_agui(port, body, headers=headers)
                answered.append((response.status, response.events[-1]["type"] if response.events else response.body))
            metrics = {"authorization": f"Bearer {ALICE}"}
            held = await _gauge(port, "yao_active_runs", metrics)
            attack.cancel_scope.cancel()
    assert answered == [(200, "RUN_FINISHED")] * 10
    assert held == 1  # the one run mallory's share allows (a quarter of 4), detached
    assert all(r.startswith("principal 'mallory' is at its limit of 1 runs in flight") for r in refusals)
