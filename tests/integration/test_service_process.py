"""``python server.py`` as a real process: the banner, serving the embedded default, SIGTERM, no child left."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from trio_websocket import ConnectionClosed

from tests.integration.processes import REPO, clean_environment, descendants, running, server_py
from tests.integration.test_service_e2e import SEED_QUESTION
from tests.service.support import receive, send
from yao_actors.cli.chat import open_service_connection


async def test_sigterm_stops_server_py_gracefully_and_leaves_no_child(tmp_path: Path) -> None:
    env = clean_environment(XDG_STATE_HOME=str(tmp_path))  # the service's default SQLite store goes there
    with trio.fail_after(60):
        async with server_py("--port", "0", env=env) as (process, banner):
            match = re.search(r"ws://127\.0\.0\.1:\d+/", banner)
            assert match, banner
            async with open_service_connection(match.group()) as ws:
                await send(ws, {"type": "ping"})
                assert await receive(ws) == {"type": "pong"}
                children = descendants(process.pid)
                process.send_signal(signal.SIGTERM)
                with pytest.raises(ConnectionClosed) as closed:
                    await ws.get_message()
            code = await process.wait()
            left = [pid for pid in children if running(pid)]  # before the context kills what is left
    assert f'yao-actors chat "{SEED_QUESTION}"' in banner
    # the embedded config's file is named after the port asked for (issue 34, item 10), and printed at start
    assert f"threads in {tmp_path}/yao-actors/conversations-port-0.sqlite3" in banner
    assert (tmp_path / "yao-actors" / "conversations-port-0.sqlite3").exists()
    assert "http://127.0.0.1:" in banner
    assert len(children) >= 2  # the two demo MCP servers
    assert closed.value.reason is not None
    assert closed.value.reason.code == 1001
    assert code == 0
    assert left == []


async def _server_py_on_every_interface(**environ: str) -> subprocess.CompletedProcess[bytes]:
    """Run ``server.py --host 0.0.0.0`` with ``environ`` as the only ``YAO_ACTORS_*`` variables; it should refuse."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("YAO_ACTORS_")} | environ
    env["XDG_STATE_HOME"] = "/nonexistent/never-written"  # refused before any store is opened
    with trio.fail_after(30):
        return await trio.run_process(
            [sys.executable, "server.py", "--host", "0.0.0.0", "--port", "0"],
            cwd=REPO,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


async def test_server_py_refuses_a_public_address_without_a_token() -> None:
    result = await _server_py_on_every_interface()
    assert result.returncode == 2
    assert b"0.0.0.0" in result.stderr
    assert b"YAO_ACTORS_TOKEN" in result.stderr
    assert result.stdout == b""


async def test_server_py_refuses_a_whitespace_token_beyond_loopback() -> None:
    result = await _server_py_on_every_interface(YAO_ACTORS_TOKEN=" ")
    assert result.returncode == 2
    assert b"YAO_ACTORS_TOKEN: refusing to listen on '0.0.0.0' with a token shorter than 16" in result.stderr
    assert result.stdout == b""


async def test_server_py_refuses_colliding_tool_names_at_start(tmp_path: Path) -> None:
    """Two real stdio servers, ``a.b`` and ``a_b``, whose tools share flat names: refused before serving."""
    server = {"command": sys.executable, "args": ["-m", "yao_actors.testing.servers"]}
    config = {
        "mcpServers": {"a.b": server, "a_b": server},
        "models": {"demo": {"provider": "demo"}},
        "assistants": {"default": {"model": "demo", "mcp": {"servers": ["a.b", {"a_b": ["echo"]}]}}},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "YAO_ACTORS_"))}
    env["XDG_STATE_HOME"] = str(tmp_path)
    with trio.fail_after(60):
        result = await trio.run_process(
            [sys.executable, "server.py", "--config", str(path), "--port", "0"],
            cwd=REPO,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 2, result.stderr
    stderr = result.stderr.decode()
    assert "assistants.default.mcp.servers: tool name 'a_b__echo' is claimed by both" in stderr
    assert "(mcpServers.a.b)" in stderr
    assert "(mcpServers.a_b)" in stderr
    assert result.stdout == b""
