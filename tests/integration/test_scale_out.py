"""Scale-out end to end (issue 17): ``server.py --workers 2`` behind a real HAProxy, threads shared through a real
Redis (and, second, through one SQLite file), one worker killed with ``kill -9`` in the middle.

Thirty conversations of three runs each go through HAProxy at once; a client whose connection drops reconnects
through HAProxy and sends ``resume`` with the last ``seq`` it saw (or sends its run again when the service never
stored it). The model is the fake OpenAI endpoint in this process (every run: a 0.4 s ``sleep`` tool call, then an
answer); the tools are the test MCP server, a stdio subprocess of each worker. Everything runs on loopback on free
ports and is stopped at the end (HAProxy, Redis, the parent, its workers and their MCP servers).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from trio_websocket import ConnectionClosed, HandshakeError

from tests.integration.processes import descendants, running, server_py
from tests.service.support import TERMINAL, receive, run_frame, send
from tests.support import require_tool
from yao_actors.service.chat import open_service_connection
from yao_actors.specs import StoreSpec
from yao_actors.store import RunStatus, open_store
from yao_actors.testing.fake_openai import FakeToolCall, RecordedRequest, Reply, open_fake_openai
from yao_actors.testing.redis_server import REDIS_SERVER, RedisServer, free_port

HAPROXY = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.path.exists("/usr/sbin/haproxy") else None)
GUARD = 240
LEASE_TTL = 4.0
"""Short, so the dead worker's runs are closed soon; renewed every 1.3 s, so a loaded machine does not lose it."""


def model(request: RecordedRequest) -> Reply:
    """A user question gets one short ``sleep`` call; the tool's result gets the answer."""
    last = request.body["messages"][-1]
    if last["role"] == "user":
        return Reply(tool_calls=(FakeToolCall("test__sleep", json.dumps({"seconds": 0.8}), "c1"),))
    users = sum(1 for m in request.body["messages"] if m["role"] == "user")
    return Reply(text=f"第{users}个问题的回答")


def write_config(tmp_path: Path, base_url: str, store: dict[str, Any]) -> Path:
    config = {
        "mcpServers": {"test": {"command": sys.executable, "args": ["-m", "yao_actors.testing.servers"]}},
        "models": {"fake": {"provider": "openai", "base_url": base_url, "model": "fake", "api_key_env": None}},
        "assistants": {"default": {"model": "fake", "mcp": {"servers": ["test"]}}},
        "store": {**store, "lease_ttl": LEASE_TTL, "lease_wait": 60},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


HAPROXY_CONFIG = """
global
    maxconn 2000
defaults
    mode http
    option redispatch
    retries 3
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout tunnel 1h
frontend yao
    bind 127.0.0.1:{front}
    default_backend yao_workers
backend yao_workers
    balance leastconn
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 500ms fall 2 rise 1
    server workers 127.0.0.1:{back} check
"""


@asynccontextmanager
async def haproxy(tmp_path: Path, back: int) -> AsyncIterator[str]:
    """HAProxy on a free loopback port in front of ``back``; yields its websocket URL once it answers /readyz."""
    require_tool(HAPROXY, "haproxy")
    front = free_port()
    path = tmp_path / "haproxy.cfg"
    path.write_text(HAPROXY_CONFIG.format(front=front, back=back), encoding="utf-8")
    log = open(tmp_path / "haproxy.log", "wb")  # noqa: SIM115, ASYNC230 (the process keeps it open)
    process = await trio.lowlevel.open_process([HAPROXY, "-db", "-f", str(path)], stdout=log, stderr=log)
    log.close()
    try:
        while not await _ready(front):
            assert process.returncode is None, (tmp_path / "haproxy.log").read_text()
            await trio.sleep(0.2)
        yield f"ws://127.0.0.1:{front}/"
    finally:
        process.kill()
        await process.wait()


async def _ready(port: int) -> bool:
    """Whether ``GET /readyz`` through ``port`` answers 200."""
    try:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
    except OSError:
        return False
    async with stream:
        await stream.send_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        with trio.move_on_after(5):
            answer = await stream.receive_some(64)
            return answer.startswith(b"HTTP/1.1 200")
    return False


@asynccontextmanager
async def workers(config: Path, tmp_path: Path, count: int) -> AsyncIterator[tuple[trio.Process, int]]:
    """``server.py --workers count``; yields the parent and the shared port. Nothing of it is left at the end."""
    log = open(tmp_path / "workers.log", "wb")  # noqa: SIM115, ASYNC230 (the process keeps it open)
    command = ("--config", str(config), "--port", "0", "--workers", str(count))
    async with server_py(*command, stderr=log, graceful=True) as (process, banner):
        log.close()
        match = re.search(r"ws://127\.0\.0\.1:(\d+)/", banner)
        assert match, banner
        assert f"{count} workers" in banner
        yield process, int(match.group(1))


def worker_pids(parent: int) -> set[int]:
    """The parent's direct children: its workers."""
    found = set()
    for pid in descendants(parent):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(stat[1]) == parent and stat[0] != "Z":
            found.add(pid)
    return found


@attrs.define
class RunLog:
    """What one client saw of one run: its events (each once, by ``seq``), when it was first sent, reconnects."""

    run_id: str
    sent_at: float = 0.0
    events: list[dict[str, Any]] = attrs.field(factory=list)
    reconnects: int = 0
    resent: int = 0

    @property
    def last_seq(self) -> int:
        return self.events[-1]["seq"] if self.events else 0


async def drive_run(url: str, thread_id: str, run_id: str, question: str) -> RunLog:
    """Run one question through HAProxy to its terminal event, reconnecting and resuming across drops."""
    log = RunLog(run_id, sent_at=trio.current_time())
    while True:
        try:
            async with open_service_connection(url) as ws:
                if log.events or log.reconnects:
                    await send(ws, {"type": "resume", "runId": run_id, "afterSeq": log.last_seq})
                else:
                    await send(ws, run_frame(question, run_id=run_id, thread_id=thread_id))
                while True:
                    frame = await receive(ws)
                    if frame.get("runId") != run_id or ("seq" not in frame and frame["type"] not in TERMINAL):
                        continue
                    if frame["type"] == "RUN_ERROR" and frame.get("code") == "unknown_run":
                        # Never stored: the connection dropped before the run reached a worker, or the worker
                        # died before it recorded the run's start. It never happened: send it again.
                        log.events.clear()
                        log.resent += 1
                        await send(ws, run_frame(question, run_id=run_id, thread_id=thread_id))
                        continue
                    log.events.append(frame)
                    if frame["type"] in TERMINAL:
                        return log
        except* (ConnectionClosed, HandshakeError, OSError, trio.BrokenResourceError):
            pass  # the worker went away (or HAProxy had none for a moment): reconnect, resume
        log.reconnects += 1
        await trio.sleep(0.2)


def check_history(messages: list[dict[str, Any]]) -> None:
    """Every assistant message with ``tool_calls`` is followed by exactly its tool messages."""
    for index, message in enumerate(messages):
        if message["role"] == "assistant" and message.get("tool_calls"):
            wanted = [call["id"] for call in message["tool_calls"]]
            following = messages[index + 1 : index + 1 + len(wanted)]
            assert [m.get("role") for m in following] == ["tool"] * len(wanted), messages
            assert [m.get("tool_call_id") for m in following] == wanted, messages


async def most_runs_going_on(spec: StoreSpec, threads: list[str], wanted: int) -> None:
    """Return once the store has ``wanted`` runs running over ``threads`` (or after 3 s: the test then says
    whether a run was cut, and whether runs were left to send after the kill)."""
    async with open_store(spec) as store:
        with trio.move_on_after(3):
            while True:
                runs = [run for thread in threads for run in await store.list_runs(thread)]
                if sum(run.status is RunStatus.RUNNING for run in runs) >= wanted:
                    return
                await trio.sleep(0.02)


async def scale_out_scenario(tmp_path: Path, store: dict[str, Any], spec: StoreSpec, conversations: int) -> None:
    with trio.fail_after(GUARD):
        async with open_fake_openai(model) as fake:
            config = write_config(tmp_path, fake.base_url, store)
            async with workers(config, tmp_path, 2) as (parent, port), haproxy(tmp_path, port) as url:
                first = worker_pids(parent.pid)
                assert len(first) == 2
                logs: dict[str, list[RunLog]] = {f"conv-{i}": [] for i in range(conversations)}
                done = 0
                kill_at: float | None = None
                half = trio.Event()

                async def conversation(thread_id: str) -> None:
                    nonlocal done
                    for turn in range(3):
                        run = await drive_run(url, thread_id, f"{thread_id}-r{turn}", f"第{turn + 1}个问题: 北京?")
                        logs[thread_id].append(run)
                        done += 1
                        if done >= conversations:
                            half.set()

                async with trio.open_nursery() as nursery:
                    for thread_id in logs:
                        nursery.start_soon(conversation, thread_id)
                    await half.wait()  # a third of the runs are over
                    # The conversations tend to go in step (every first run ends at about the same time): kill
                    # once most have their next run recorded and going on, so that the victim is cut in the middle
                    # of some (a worker holds about half of them), not between runs.
                    await most_runs_going_on(spec, list(logs), conversations * 2 // 3)
                    victim = min(first)
                    os.kill(victim, signal.SIGKILL)
                    kill_at = trio.current_time()
                # The parent restarts the dead worker (after its backoff), and the new one serves.
                while not (restarted := worker_pids(parent.pid) - first) or not re.search(  # noqa: ASYNC110
                    rf"worker \d started \(pid {min(restarted)}\)", (tmp_path / "workers.log").read_text()
                ):
                    await trio.sleep(0.2)
                now = worker_pids(parent.pid)
                # SIGTERM reaches every worker, which shuts down gracefully; the parent exits once all have.
                parent.send_signal(signal.SIGTERM)
                stopped = await parent.wait()
                left = [pid for pid in now if running(pid)]
                log_text = (tmp_path / "workers.log").read_text(errors="replace")
        async with open_store(spec) as stored:
            histories = {t: await stored.load_history(t) for t in logs}
            runs = {t: await stored.list_runs(t) for t in logs}

    assert stopped == 0, log_text[-4000:]
    assert left == []
    assert victim not in now
    assert len(now) == 2
    assert re.search(rf"worker \d \(pid {victim}\) exited with signal SIGKILL; restarting it", log_text), log_text
    interrupted = 0
    for thread_id, thread_runs in logs.items():
        assert len(thread_runs) == 3
        for run in thread_runs:
            terminals = [e for e in run.events if e["type"] in TERMINAL]
            assert len(terminals) == 1, (run.run_id, run.events)
            assert run.events[-1] is terminals[0]
            seqs = [e["seq"] for e in run.events]
            assert seqs == sorted(set(seqs)), (run.run_id, seqs)
            if terminals[0]["type"] == "RUN_ERROR":
                assert terminals[0]["code"] == "interrupted", terminals[0]
                assert run.sent_at < kill_at, run.run_id  # only runs already going on when the worker died
                interrupted += 1
            else:
                assert terminals[0]["result"]["outcome"] == "answered", (run, log_text[-4000:])
        check_history(histories[thread_id])
        stored_runs = runs[thread_id]
        assert [r.run_id for r in stored_runs] == [r.run_id for r in thread_runs]
        assert all(r.status is not RunStatus.RUNNING for r in stored_runs)
        for before, after in itertools.pairwise(stored_runs):
            assert before.finished_at is not None
            assert before.finished_at <= after.started_at, (before, after)
    # The runs after the kill all succeeded (checked above); some were cut by it.
    assert sum(1 for t in logs.values() for r in t if r.sent_at > kill_at) > 0
    assert interrupted >= 1


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    require_tool(REDIS_SERVER, "redis-server")
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_two_workers_behind_haproxy_with_redis_survive_a_kill_9(tmp_path: Path, redis: RedisServer) -> None:
    store = {"type": "redis", "url": redis.url, "prefix": "scale:"}
    await scale_out_scenario(tmp_path, store, StoreSpec("redis", url=redis.url, prefix="scale:"), 30)


async def test_two_workers_sharing_sqlite_on_one_machine_survive_a_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    await scale_out_scenario(tmp_path, {"type": "sqlite", "path": str(path)}, StoreSpec.sqlite(path), 12)
