"""What the scale-out tests share: a real HAProxy in front of ``server.py --workers N``, their config, the fake
model's script, and the checks of a thread's history.

The model is the fake OpenAI endpoint in the test's process (every run: one short ``sleep`` tool call, then an
answer); the tools are the test MCP server, a stdio subprocess of each worker. Everything runs on loopback on free
ports and is stopped at the end (HAProxy, the parent, its workers and their MCP servers).
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from tests.integration.processes import descendants, server_py
from tests.support import require_tool
from yao_actors.testing.fake_openai import FakeToolCall, RecordedRequest, Reply
from yao_actors.testing.redis_server import free_port

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


#: The defaults of every HAProxy of these tests: HTTP, and a websocket's tunnel kept an hour.
HAPROXY_DEFAULTS = """defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout tunnel 1h
"""
HAPROXY_CONFIG = (
    "global\n    maxconn 2000\n"
    + HAPROXY_DEFAULTS
    + """frontend yao
    bind 127.0.0.1:{front}
    default_backend yao_workers
backend yao_workers
    option redispatch
    retries 3
    balance leastconn
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 500ms fall 2 rise 1
    server workers 127.0.0.1:{back} check
"""
)


@asynccontextmanager
async def haproxy(tmp_path: Path, back: int) -> AsyncIterator[str]:
    """HAProxy on a free loopback port in front of ``back``; yields its websocket URL once it answers /readyz."""
    async with open_haproxy(tmp_path, HAPROXY_CONFIG, back=back) as url:
        yield url


@asynccontextmanager
async def open_haproxy(tmp_path: Path, config: str, *, fd_limit: int | None = None, **ports: int) -> AsyncIterator[str]:
    """HAProxy run with ``config`` (``{front}`` and the named ``ports`` filled in; ``front`` a free loopback port);
    yields its websocket URL once ``GET /readyz`` through it answers 200. ``fd_limit``: its hard limit of open files
    (the soft one 1024), as on a system that sets no more."""
    require_tool(HAPROXY, "haproxy")
    assert HAPROXY is not None
    front = free_port()
    path = tmp_path / "haproxy.cfg"
    path.write_text(config.format(front=front, **ports), encoding="utf-8")
    log = open(tmp_path / "haproxy.log", "wb")  # noqa: SIM115, ASYNC230 (the process keeps it open)

    def limit_files() -> None:
        if fd_limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, fd_limit), fd_limit))

    process = await trio.lowlevel.open_process(
        [HAPROXY, "-db", "-f", str(path)], stdout=log, stderr=log, preexec_fn=limit_files
    )
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


def check_history(messages: list[dict[str, Any]]) -> None:
    """Every assistant message with ``tool_calls`` is followed by exactly its tool messages."""
    for index, message in enumerate(messages):
        if message["role"] == "assistant" and message.get("tool_calls"):
            wanted = [call["id"] for call in message["tool_calls"]]
            following = messages[index + 1 : index + 1 + len(wanted)]
            assert [m.get("role") for m in following] == ["tool"] * len(wanted), messages
            assert [m.get("tool_call_id") for m in following] == wanted, messages
