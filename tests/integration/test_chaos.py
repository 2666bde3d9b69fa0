"""The chaos test: two workers behind a real HAProxy sharing one store, clients that drop and resume at random,
workers killed with ``kill -9`` and (with Redis) the store restarted, all while 60 conversations of 3 runs go on.

Afterwards, from what the clients saw and what the store holds:

- every run a client started has exactly one terminal event (received directly or by ``resume``), its numbers
  running 1, 2, 3, ... without a gap;
- each run's stored log is exactly what its client saw (durable before visible), its record agrees with its
  terminal event, and no stored run is left ``running``;
- no thread's runs overlap; no stored assistant ``tool_calls`` lacks any of its tool messages;
- no run slot is held once the runs are over (``yao_active_runs`` is 0 on the workers);
- the parent restarted each dead worker.

The randomness is seeded (``CHAOS_SEED`` to replay one); the seed is in the failure's message.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import signal
from pathlib import Path
from typing import Any

import attrs
import trio
from trio_websocket import ConnectionClosed, HandshakeError

from tests.integration.processes import running
from tests.integration.scale_support import (
    check_history,
    haproxy,
    model,
    worker_pids,
    workers,
    write_config,
)
from tests.service.support import TERMINAL, receive, run_frame, send
from tests.support import needs_redis
from yao_actors.cli.chat import open_service_connection
from yao_actors.specs import StoreSpec
from yao_actors.store import RunStatus, open_store
from yao_actors.testing.fake_openai import open_fake_openai
from yao_actors.testing.redis_server import RedisServer

CONVERSATIONS = 60
RUNS = 3
GUARD = 150
DROP_CHANCE = 0.04
"""The chance a client drops its connection after any one event (at most twice a run) and resumes."""


def seed() -> int:
    return int(os.environ.get("CHAOS_SEED") or random.SystemRandom().randrange(2**32))


@attrs.define
class ClientRun:
    """What the client saw of one run: each event once, in ``seq`` order, across reconnects."""

    run_id: str
    thread_id: str
    events: list[dict[str, Any]] = attrs.field(factory=list)
    drops: int = 0
    reconnects: int = 0

    @property
    def last_seq(self) -> int:
        return self.events[-1]["seq"] if self.events else 0


async def drive(url: str, run: ClientRun, question: str, rng: random.Random) -> None:
    """Run a question to its terminal event through HAProxy, dropping at random and resuming after every drop."""
    while True:
        try:
            async with open_service_connection(url) as ws:
                if run.events or run.reconnects:
                    await send(ws, {"type": "resume", "runId": run.run_id, "afterSeq": run.last_seq})
                else:
                    await send(ws, run_frame(question, run_id=run.run_id, thread_id=run.thread_id))
                while True:
                    frame = await receive(ws)
                    if frame.get("runId") != run.run_id:
                        continue
                    if frame["type"] == "error":  # the store was out of reach for the resume: resume again
                        assert frame["code"] == "store_unavailable", frame
                        break
                    if "seq" not in frame:
                        continue
                    if frame["type"] == "RUN_ERROR" and frame.get("code") == "unknown_run" and not run.events:
                        # Never stored: the worker died before the run started in the store. Send it again.
                        await send(ws, run_frame(question, run_id=run.run_id, thread_id=run.thread_id))
                        continue
                    run.events.append(frame)
                    if frame["type"] in TERMINAL:
                        return
                    if run.drops < 2 and rng.random() < DROP_CHANCE:
                        run.drops += 1
                        break  # the client goes away mid-run; the run goes on, detached
        except* (ConnectionClosed, HandshakeError, OSError, trio.BrokenResourceError):
            pass  # the worker went away (or HAProxy had none for a moment): reconnect, resume
        run.reconnects += 1
        await trio.sleep(0.1 + rng.random() * 0.2)


def brief(events: list[dict[str, Any]]) -> str:
    """A log in short: each event's seq and type (and a RUN_ERROR's code)."""
    return " ".join(f"{e['seq']}:{e['type']}{':' + e['code'] if 'code' in e else ''}" for e in events)


async def active_runs(url: str) -> int:
    """``yao_active_runs`` of the worker HAProxy picks for this request (-1: none was ready)."""
    port = int(url.rsplit(":", 1)[1].strip("/"))
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := await stream.receive_some(65536):
            answer += chunk
    if answer.startswith(b"HTTP/1.1 503"):  # no worker ready this instant (one is restarting): ask again
        return -1
    match = re.search(rb"^yao_active_runs (\S+)$", answer, re.MULTILINE)
    assert match, answer[:300]
    return int(float(match.group(1)))


async def chaos(tmp_path: Path, store: dict[str, Any], spec: StoreSpec, redis: RedisServer | None) -> None:
    rng = random.Random(chosen := seed())
    try:
        await _chaos(tmp_path, store, spec, redis, rng)
    except BaseException as error:
        error.add_note(f"chaos seed: CHAOS_SEED={chosen}")
        raise


async def _chaos(
    tmp_path: Path, store: dict[str, Any], spec: StoreSpec, redis: RedisServer | None, rng: random.Random
) -> None:
    runs: dict[str, list[ClientRun]] = {f"chaos-{i}": [] for i in range(CONVERSATIONS)}
    killed: list[int] = []
    with trio.fail_after(GUARD):
        async with open_fake_openai(model) as fake:
            config = write_config(tmp_path, fake.base_url, store)
            async with workers(config, tmp_path, 2) as (parent, port), haproxy(tmp_path, port) as url:
                done = 0

                async def conversation(thread_id: str) -> None:
                    nonlocal done
                    await trio.sleep(rng.random() * 2)
                    for turn in range(RUNS):
                        run = ClientRun(f"{thread_id}-r{turn}", thread_id)
                        runs[thread_id].append(run)
                        await drive(url, run, f"第{turn + 1}个问题: 北京今天适合穿什么?", rng)
                        done += 1

                async def havoc() -> None:
                    # Two kills of a random worker, and one Redis restart, spread over the busy part.
                    actions = ["kill", "kill", *(["restart redis"] if redis is not None else [])]
                    rng.shuffle(actions)
                    moments = sorted(rng.uniform(1.5, 8.0) for _ in actions)
                    start = trio.current_time()
                    for moment, action in zip(moments, actions, strict=True):
                        await trio.sleep_until(start + moment)
                        if action == "kill":
                            alive = sorted(worker_pids(parent.pid))
                            if alive:
                                victim = rng.choice(alive)
                                os.kill(victim, signal.SIGKILL)
                                killed.append(victim)
                        elif redis is not None:
                            await trio.to_thread.run_sync(redis.stop)
                            await trio.sleep(0.5 + rng.random())
                            await trio.to_thread.run_sync(redis.start)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(havoc)
                    for thread_id in runs:
                        nursery.start_soon(conversation, thread_id)
                # The parent restarts each dead worker (after its backoff), and the new one serves.
                while len(worker_pids(parent.pid)) < 2 or any(  # noqa: ASYNC110 (another process's doing)
                    f"(pid {victim}) exited with signal SIGKILL; restarting it"
                    not in (tmp_path / "workers.log").read_text(errors="replace")
                    for victim in killed
                ):
                    await trio.sleep(0.2)
                # No slot is held once the runs are over (detached ones end within the grace: none here).
                with trio.fail_after(30):
                    while any([await active_runs(url) != 0 for _ in range(8)]):  # noqa: ASYNC110 (as above)
                        await trio.sleep(0.5)
                now = worker_pids(parent.pid)
                parent.send_signal(signal.SIGTERM)
                stopped = await parent.wait()
                left = [pid for pid in now if running(pid)]
                log_text = (tmp_path / "workers.log").read_text(errors="replace")
        async with open_store(spec) as stored:
            histories = {t: await stored.load_history(t) for t in runs}
            records = {t: await stored.list_runs(t) for t in runs}
            logs = {run.run_id: await stored.read_events(run.run_id) for t in runs for run in runs[t]}

    assert stopped == 0, log_text[-4000:]
    assert left == []
    assert len(killed) == 2
    for victim in killed:
        assert victim not in now
        assert re.search(rf"worker \d \(pid {victim}\) exited with signal SIGKILL; restarting it", log_text)
    for thread_id, client_runs in runs.items():
        assert len(client_runs) == RUNS
        for run in client_runs:
            seqs = [e["seq"] for e in run.events]
            assert seqs == list(range(1, len(seqs) + 1)), f"{run.run_id}: {brief(run.events)}"
            terminals = [e for e in run.events if e["type"] in TERMINAL]
            assert len(terminals) == 1, (run.run_id, run.events)
            assert run.events[-1] is terminals[0], (run.run_id, run.events)
            assert logs[run.run_id] == run.events, (
                f"{run.run_id}\nstored: {brief(logs[run.run_id])}\nclient: {brief(run.events)}"
            )
            if terminals[0]["type"] == "RUN_ERROR":
                # Cut by a kill (closed by a sweep or the thread's next run), or out of store for too long.
                assert terminals[0]["code"] in ("interrupted", "store_unavailable"), terminals[0]
            else:
                assert terminals[0]["result"]["outcome"] == "answered", terminals[0]
        check_history(histories[thread_id])
        stored_runs = records[thread_id]
        assert [r.run_id for r in stored_runs] == [r.run_id for r in client_runs]
        for record, run in zip(stored_runs, client_runs, strict=True):
            ending = run.events[-1].get("code", "answered")
            expected = {"answered": RunStatus.FINISHED, "interrupted": RunStatus.INTERRUPTED}
            assert record.status is expected.get(ending, RunStatus.FAILED), (record, ending)
        for before, after in itertools.pairwise(stored_runs):
            assert before.finished_at is not None
            assert before.finished_at <= after.started_at, (before, after)
    # The chaos happened: clients dropped and resumed, and runs were cut by the kills.
    assert sum(run.drops for t in runs.values() for run in t) > 0


@needs_redis
async def test_chaos_with_two_workers_sharing_redis(tmp_path: Path, redis: RedisServer) -> None:
    store = {"type": "redis", "url": redis.url, "prefix": "chaos:"}
    await chaos(tmp_path, store, StoreSpec("redis", url=redis.url, prefix="chaos:"), redis)


async def test_chaos_with_two_workers_sharing_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    await chaos(tmp_path, {"type": "sqlite", "path": str(path)}, StoreSpec.sqlite(path), None)
