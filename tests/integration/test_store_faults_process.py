"""The durable stores under hostile ids and a bad day, through a real ``yao-actors serve`` process (issue 29).

Each test drives the service over its websocket as clients would, then checks that the process is still alive
and answering: a store error ends a run ``store_unavailable`` and never the process.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import IO, Any

import coredis
import pytest
import trio

from tests.integration.processes import server_py
from tests.integration.scale_support import worker_pids
from tests.service.support import http_request, receive, run_frame, send, until_terminal
from tests.support import needs_redis, require_tool
from yao_actors.cli.chat import open_service_connection
from yao_actors.events import stored_events
from yao_actors.store import StoreSpec, open_store
from yao_actors.testing.redis_server import RedisServer

GUARD = 60
TOKENS = {"alice": "a" * 20, "bob": "b" * 20}


def write_config(tmp_path: Path, store: dict[str, Any]) -> Path:
    """The offline demo model, no tool servers, two principals, and ``store``."""
    config = {
        "models": {"demo": {"provider": "demo"}},
        "assistants": {"default": {"model": "demo"}},
        "store": store,
        "server": {"tokens": TOKENS},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


@asynccontextmanager
async def serving(
    config: Path, *options: str, log: IO[Any] | None = None
) -> AsyncIterator[tuple[trio.Process, str, int]]:
    """``yao-actors serve --config`` on a free port (its log to ``log``): the process, its websocket URL and its
    port."""
    async with server_py("--config", str(config), "--port", "0", *options, stderr=log) as (process, banner):
        match = re.search(r"ws://127\.0\.0\.1:(\d+)/", banner)
        assert match, banner
        yield process, match.group(), int(match.group(1))


async def run_as(url: str, principal: str, thread_id: str, run_id: str) -> dict[str, Any]:
    """One run of ``principal`` on its own connection; its terminal event."""
    async with open_service_connection(url, token=TOKENS[principal]) as ws:
        await send(ws, run_frame("hello", run_id=run_id, thread_id=thread_id))
        return (await until_terminal(ws, run_id))[-1]


async def still_serving(process: trio.Process, url: str, port: int) -> None:
    """The process is alive, answers a ping and ``/healthz``, and runs a new run to its end."""
    assert process.returncode is None
    async with open_service_connection(url, token=TOKENS["alice"]) as ws:
        await send(ws, {"type": "ping"})
        assert (await receive(ws))["type"] == "pong"
    assert (await http_request(port, "/healthz")).status == 200
    last = await run_as(url, "alice", "after-all", "after-all")
    assert (last["type"], last["result"]["outcome"]) == ("RUN_FINISHED", "answered")
    assert process.returncode is None


#: Runs in order, each (principal, thread, run): ids that would have named another's keys, both ways round.
SEQUENCES = [
    ("alice", "x:messages", "r1"),
    ("bob", "x", "r2"),
    ("alice", "y:runs", "r3"),
    ("bob", "y", "r4"),
    ("alice", "z:lease", "r5"),
    ("bob", "z", "r6"),
    ("alice", "t1", "r:events"),
    ("bob", "t2", "r"),
    ("alice", "w", "q"),
    ("bob", "w:lease", "q:events"),
    ("bob", "w:messages", "q:x"),
]


@needs_redis
async def test_ids_naming_other_keys_on_redis_run_apart_across_principals(tmp_path: Path, redis: RedisServer) -> None:
    config = write_config(tmp_path, {"type": "redis", "url": redis.url, "prefix": "ids:"})
    with trio.fail_after(GUARD):
        async with serving(config) as (process, url, port):
            for principal, thread_id, run_id in SEQUENCES:
                last = await run_as(url, principal, thread_id, run_id)
                assert (last["type"], last["runId"], last["threadId"]) == ("RUN_FINISHED", run_id, thread_id)
                assert process.returncode is None, (principal, thread_id, run_id)
            for principal, thread_id, run_id in SEQUENCES:
                async with open_service_connection(url, token=TOKENS[principal]) as ws:
                    await send(ws, {"type": "history", "threadId": thread_id})
                    snapshot = await receive(ws)
                    await send(ws, {"type": "resume", "runId": run_id})
                    replayed = await until_terminal(ws, run_id)
                assert [r["runId"] for r in snapshot["runs"]] == [run_id], thread_id
                assert [m["role"] for m in snapshot["messages"]] == ["user", "assistant"], thread_id
                assert replayed[0]["type"] == "RUN_STARTED"
                assert replayed[-1]["type"] == "RUN_FINISHED"
            await still_serving(process, url, port)


@needs_redis
async def test_a_redis_error_ends_the_run_store_unavailable_and_the_process_serves_on(
    tmp_path: Path, redis: RedisServer
) -> None:
    """Data written before ids were escaped (thread ``v:messages``'s hash is where thread ``v``'s history now goes)
    makes Redis answer ``WRONGTYPE``: the run ends ``store_unavailable``, the next ones run."""
    config = write_config(tmp_path, {"type": "redis", "url": redis.url, "prefix": "legacy:"})
    with trio.fail_after(GUARD):
        async with coredis.Redis.from_url(redis.url, decode_responses=True) as raw:
            await raw.hset("legacy:thread:v:messages", {"createdAt": "1", "updatedAt": "1"})
            await raw.set("legacy:run:s:events", "not a stream")
        async with serving(config) as (process, url, port):
            for thread_id, run_id in (("v", "r1"), ("fresh", "s:events"), ("fresh2", "s")):
                last = await run_as(url, "bob", thread_id, run_id)
                if run_id == "s":
                    assert (last["type"], last["code"]) == ("RUN_ERROR", "store_unavailable"), last
                    assert "WrongTypeError" in last["message"]
                elif thread_id == "v":
                    assert (last["type"], last["code"]) == ("RUN_ERROR", "store_unavailable"), last
                else:
                    assert last["type"] == "RUN_FINISHED", last
                assert process.returncode is None
            await still_serving(process, url, port)


@needs_redis
async def test_a_resume_whose_store_goes_down_gets_a_store_unavailable_error(
    tmp_path: Path, redis: RedisServer
) -> None:
    """A run going on elsewhere (another process's, its lease held) is followed in the store; Redis stops: the
    resume ends with an ``error`` frame (not the run's terminal event: the run goes on; resume again later)."""
    spec = StoreSpec("redis", url=redis.url, prefix="follow:")
    config = write_config(tmp_path, {"type": "redis", "url": redis.url, "prefix": "follow:"})
    with trio.fail_after(GUARD):
        async with open_store(spec) as elsewhere:
            await elsewhere.open_thread("t1", "alice")
            assert (await elsewhere.leases().take("t1", "elsewhere:live", 600)).taken  # as a run does, first
            await elsewhere.start_run("t1", "live", "default", [{"role": "user", "content": "hello"}])
            await elsewhere.append_events(
                "live", stored_events([{"type": "RUN_STARTED", "threadId": "t1", "runId": "live", "seq": 1}])
            )
        async with serving(config) as (process, url, port):
            async with open_service_connection(url, token=TOKENS["alice"]) as ws:
                await send(ws, {"type": "resume", "runId": "live"})
                assert (await receive(ws))["seq"] == 1
                redis.stop()  # while the service waits for the run's next event
                last = await receive(ws)
            assert (last["type"], last["code"], last["runId"]) == ("error", "store_unavailable", "live"), last
            redis.start()
            await still_serving(process, url, port)


# --------------------------------------------------------------------------- SQLite's files made unwritable


@pytest.fixture
def chattr(tmp_path: Path) -> None:
    """Skip unless ``chattr +i`` works here (the tool, a filesystem with attributes, CAP_LINUX_IMMUTABLE)."""
    require_tool(shutil.which("chattr"), "chattr")
    probe = tmp_path / "probe"
    probe.write_text("")
    if subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is refused here (it needs CAP_LINUX_IMMUTABLE and ext4, xfs, btrfs, ...)")
    subprocess.run(["chattr", "-i", str(probe)], check=True)


@contextmanager
def immutable(path: Path) -> Iterator[None]:
    """``chattr +i path`` for the block (taken off whatever happens, or the test's folder cannot be removed)."""
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


async def test_a_lone_service_maps_no_shm_and_an_unwritable_wal_ends_runs_store_unavailable(
    tmp_path: Path, chattr: None
) -> None:
    """A lone ``yao-actors serve`` holds its SQLite file for itself: no ``-shm`` to make unwritable (it was a
    SIGBUS, exit -7); the ``-wal`` made immutable fails the runs ``store_unavailable``, and the process lives."""
    database = tmp_path / "conversations.sqlite3"
    config = write_config(tmp_path, {"type": "sqlite", "path": str(database)})
    log_path = tmp_path / "service.log"
    with trio.fail_after(GUARD), log_path.open("w") as log:
        async with serving(config, log=log) as (process, url, port):
            assert (await run_as(url, "alice", "t1", "r1"))["type"] == "RUN_FINISHED"
            assert not await trio.Path(f"{database}-shm").exists()
            with immutable(Path(f"{database}-wal")):
                for run_id in ("r2", "r3"):
                    last = await run_as(url, "alice", "t1", run_id)
                    assert (last["type"], last["code"]) == ("RUN_ERROR", "store_unavailable"), last
                    assert last["message"] == "the conversation store is unavailable", last  # no path: the log's
                    assert process.returncode is None
            assert (await run_as(url, "alice", "t1", "r4"))["type"] == "RUN_FINISHED"
            await still_serving(process, url, port)
    assert f"{database}-wal is immutable (chattr +i)" in log_path.read_text(encoding="utf-8")


async def test_workers_sharing_sqlite_refuse_calls_while_the_shm_is_immutable(tmp_path: Path, chattr: None) -> None:
    """Two workers share the file (and map its ``-shm``): made immutable, it fails their runs ``store_unavailable``
    instead of killing them with SIGBUS; once writable again, they run on (the same worker processes)."""
    database = tmp_path / "conversations.sqlite3"
    config = write_config(tmp_path, {"type": "sqlite", "path": str(database)})
    log_path = tmp_path / "service.log"
    with trio.fail_after(GUARD), log_path.open("w") as log:
        async with serving(config, "--workers", "2", log=log) as (parent, url, port):
            assert (await run_as(url, "alice", "t0", "r0"))["type"] == "RUN_FINISHED"
            workers = worker_pids(parent.pid)
            assert len(workers) == 2
            with immutable(Path(f"{database}-shm")):
                for index in range(6):  # new connections: the kernel spreads them over both workers
                    last = await run_as(url, "alice", f"t{index}", f"shm-{index}")
                    assert (last["type"], last["code"]) == ("RUN_ERROR", "store_unavailable"), last
                    assert last["message"] == "the conversation store is unavailable", last  # no path: the log's
            for index in range(6):
                assert (await run_as(url, "bob", f"u{index}", f"after-{index}"))["type"] == "RUN_FINISHED"
            assert worker_pids(parent.pid) == workers
            assert parent.returncode is None
            assert (await http_request(port, "/healthz")).status == 200
    assert f"{database}-shm is immutable (chattr +i)" in log_path.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- SQLite's files deleted


@pytest.mark.parametrize("options", [(), ("--workers", "2")], ids=["lone", "workers"])
async def test_sqlite_files_deleted_under_the_service_stop_runs_and_readiness(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    """The store's files deleted while the service runs: it used to finish runs against the unlinked inode (all
    gone at the next start, silently). Now runs end ``store_unavailable`` and ``/readyz`` is 503, the process lives."""
    database = tmp_path / "state" / "conversations.sqlite3"
    config = write_config(tmp_path, {"type": "sqlite", "path": str(database)})
    with trio.fail_after(GUARD):
        async with serving(config, *options) as (process, url, port):
            assert (await run_as(url, "alice", "t1", "r1"))["type"] == "RUN_FINISHED"
            assert (await http_request(port, "/readyz")).status == 200
            for name in await trio.Path(database.parent).iterdir():
                await name.unlink()
            for index in range(4):  # with workers, over both
                last = await run_as(url, "alice", f"t{index}", f"gone-{index}")
                assert (last["type"], last["code"]) == ("RUN_ERROR", "store_unavailable"), last
                assert last["message"] == "the conversation store is unavailable", last  # the path: the log's
            for _ in range(4):
                ready = await http_request(port, "/readyz")
                assert (ready.status, ready.json()["status"], ready.json()["store"]) == (
                    503,
                    "not_ready",
                    "unavailable",
                )
            assert (await http_request(port, "/healthz")).status == 200
            assert process.returncode is None


# --------------------------------------------------------------------------- afterSeq out of range


async def test_a_resume_after_an_out_of_range_seq_is_a_bad_request(tmp_path: Path) -> None:
    """``afterSeq`` ≥ 2⁶³ was ``internal_error`` (an OverflowError in SQLite); now ``bad_request`` naming it."""
    config = write_config(tmp_path, {"type": "sqlite", "path": str(tmp_path / "conversations.sqlite3")})
    with trio.fail_after(GUARD):
        async with serving(config) as (process, url, port):
            assert (await run_as(url, "alice", "t1", "r1"))["type"] == "RUN_FINISHED"
            async with open_service_connection(url, token=TOKENS["alice"]) as ws:
                for after in (2**63, 2**64, 10**30):
                    await send(ws, {"type": "resume", "runId": "r1", "afterSeq": after})
                    refused = await receive(ws)
                    assert (refused["type"], refused["code"], refused["runId"]) == ("RUN_ERROR", "bad_request", "r1")
                    assert refused["message"].startswith(f"afterSeq: {after} is greater than the maximum")
                await send(ws, {"type": "resume", "runId": "r1", "afterSeq": 2**63 - 1})
                last = await receive(ws)
                assert (last["type"], last["seq"]) == ("RUN_FINISHED", 2**63)
            await still_serving(process, url, port)
