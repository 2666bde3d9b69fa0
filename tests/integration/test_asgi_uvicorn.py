"""The ASGI application mounted in FastAPI under a real uvicorn on loopback: ``examples/fastapi_app.py`` as written.

The example runs as its own process (the Trio runtime a guest of uvicorn's loop, the demo servers its children),
driven by the official ``@ag-ui/client`` over ``POST /yao/agui``, by the websocket client on ``/yao/``, and by plain
HTTP; with a token set, the service's own rules answer (401 without it, 403 for a foreign origin). SIGINT shuts it
down with exit code 0 and leaves no child process.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
from trio_websocket import ConnectionClosed

from tests.integration.processes import REPO, clean_environment, descendants, end_process, running
from tests.integration.test_agui_node import NODE_DIR, run_http_agent
from tests.service.agui_support import open_agui, run_input
from tests.service.support import handshake_status, http_request, receive, run_frame, send, until_terminal
from yao_actors.cli.chat import open_service_connection
from yao_actors.testing import read_line

SEED_QUESTION = "北京今天适合穿什么?"
TOKEN = "asgi-test-token"

pytest.importorskip("fastapi", reason="the FastAPI example needs fastapi (pip install -e '.[test]')")

needs_node = pytest.mark.skipif(
    (not (NODE_DIR / "node_modules" / "@ag-ui" / "client").is_dir()) and os.environ.get("CI") != "true",
    reason="needs Node and @ag-ui/client: run `npm ci --prefix tests/node` (.ci/run does)",
)


@asynccontextmanager
async def fastapi_example() -> AsyncIterator[tuple[trio.Process, int]]:
    """``python examples/fastapi_app.py`` on a free port with a token; yields the process and its port."""
    env = clean_environment(PORT="0", YAO_ACTORS_TOKEN=TOKEN)
    async with _uvicorn_process(["examples/fastapi_app.py"], env) as running_app:
        yield running_app


@asynccontextmanager
async def _uvicorn_process(args: list[str], env: dict[str, str]) -> AsyncIterator[tuple[trio.Process, int]]:
    """``python ARGS`` in the repository, serving with uvicorn; yields the process and its port once it serves.
    On exit a process still running gets SIGINT (SIGKILL after 30 s)."""
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))}
    process = await trio.lowlevel.open_process([sys.executable, *args], cwd=REPO, env=env, stderr=subprocess.PIPE)
    try:
        assert process.stderr is not None
        line = ""
        while "Uvicorn running on" not in line:
            line = await read_line(process.stderr)
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert match, line
        yield process, int(match.group(1))
    finally:
        await end_process(process, signal.SIGINT)


@needs_node
async def test_the_fastapi_example_serves_agui_the_websocket_and_health_then_leaves_no_child() -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with trio.fail_after(120):
        async with fastapi_example() as (process, port):
            children = descendants(process.pid)
            assert len(children) >= 2  # the weather and clothing servers, children of the uvicorn process
            assert (await http_request(port, "/yao/healthz")).json() == {"status": "serving"}
            ready = await http_request(port, "/yao/readyz")
            assert ready.status == 200, ready
            assert ready.json()["status"] == "ready"
            assert (await http_request(port, "/yao/metrics")).status == 401
            metrics = await http_request(port, "/yao/metrics", headers=auth)
            assert metrics.status == 200
            assert b"yao_" in metrics.body

            async with open_service_connection(f"ws://127.0.0.1:{port}/yao/", token=TOKEN) as ws:
                await send(ws, run_frame(SEED_QUESTION, run_id="ws-seed"))
                ws_events = await until_terminal(ws, "ws-seed")
            assert await handshake_status(port, path="/yao/") == 401
            assert await handshake_status(port, {**auth, "Origin": "https://evil.example"}, path="/yao/") == 403

            refused = await run_http_agent({"url": f"http://127.0.0.1:{port}/yao/agui", "question": SEED_QUESTION})
            agent = {"url": f"http://127.0.0.1:{port}/yao/agui", "headers": auth}
            seen = await run_http_agent({**agent, "question": SEED_QUESTION, "threadId": "seed"})
            follow_up = await run_http_agent(
                {**agent, "question": "谢谢", "threadId": "seed", "messages": seen["messages"]}
            )

            ask = await http_request(
                port,
                "/ask?question=%E4%B8%8A%E6%B5%B7%E4%BB%8A%E5%A4%A9%E9%80%82%E5%90%88%E7%A9%BF%E4%BB%80%E4%B9%88%3F",
            )
            children |= descendants(process.pid)
            process.send_signal(signal.SIGINT)
            await process.wait()
    assert process.returncode == 0
    assert [pid for pid in children if running(pid)] == []

    assert ws_events[-1]["type"] == "RUN_FINISHED"
    assert "北京" in "".join(e["delta"] for e in ws_events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert [e["seq"] for e in ws_events] == list(range(1, len(ws_events) + 1))

    assert "401" in (refused["error"] or ""), refused
    assert "error" not in seen or seen["error"] is None, seen
    assert "[ag-ui]" not in seen["stderr"], seen["stderr"]
    events = seen["events"]
    assert events[-1]["type"] == "RUN_FINISHED"
    assert [e["toolCallName"] for e in events if e["type"] == "TOOL_CALL_START"] == ["weather__get", "clothing__advise"]
    weather = json.loads(next(e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"))
    answer = seen["result"]["text"]
    assert "北京" in answer
    assert str(weather["temp"]) in answer
    assert [m["role"] for m in seen["messages"]] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert follow_up["events"][-1]["type"] == "RUN_FINISHED"

    assert ask.status == 200
    assert ask.json()["outcome"] == "answered"
    assert "上海" in ask.json()["text"]


@asynccontextmanager
async def slow_app(**env: str) -> AsyncIterator[tuple[trio.Process, int]]:
    """``tests/integration/asgi_slow_app.py`` under uvicorn on a free port (no token; ``env`` added); as
    :func:`fastapi_example`."""
    environment = clean_environment(PORT="0", **env)
    async with _uvicorn_process(["-m", "tests.integration.asgi_slow_app"], environment) as running_app:
        yield running_app


async def stats(port: int) -> dict[str, object]:
    reply = await http_request(port, "/stats")
    assert reply.status == 200, reply
    result: dict[str, object] = reply.json()
    return result


async def test_closing_the_sse_response_under_uvicorn_cancels_the_tool_call_in_its_server_process() -> None:
    with trio.fail_after(60):
        async with slow_app() as (process, port):
            children = descendants(process.pid)
            async with open_agui(port, run_input("go", run_id="slow")) as (response, events):
                assert response.status == 200
                async for event in events:
                    if event["type"] == "STEP_FINISHED":  # the model asked for the 30-second tool
                        break
                while (await stats(port))["calls"] != {"sleep": 1}:  # noqa: ASYNC110 - counted in the server
                    await trio.sleep(0.05)
            while (await stats(port))["cancelled"] != 1:  # noqa: ASYNC110 - the server saw notifications/cancelled
                await trio.sleep(0.05)
            process.send_signal(signal.SIGINT)
            await process.wait()
    assert process.returncode == 0
    assert [pid for pid in children if running(pid)] == []


async def test_sigterm_lets_a_websocket_run_finish_within_the_grace_then_the_service_closes_it() -> None:
    """As under ``yao-actors serve``: the run in flight gets ``shutdown_grace`` and its terminal event, and the
    service closes the websocket (1001); uvicorn alone would close it at once with 1012, no terminal event."""
    with trio.fail_after(60):
        async with slow_app() as (process, port):
            assert process.stderr is not None
            async with open_service_connection(f"ws://127.0.0.1:{port}/") as ws:
                await send(ws, run_frame("hold", run_id="held"))
                head = [await receive(ws)]
                while head[-1]["type"] != "STEP_STARTED":  # the model's call has begun: it waits for /release
                    head.append(await receive(ws))
                process.send_signal(signal.SIGTERM)
                line = ""
                while "Waiting for yao_actors runs to finish" not in line:
                    line = await read_line(process.stderr)
                draining = await http_request(port, "/healthz")  # the listener stays open for plain HTTP
                assert (await http_request(port, "/release", method="POST")).status == 200
                rest = await until_terminal(ws, "held")
                with pytest.raises(ConnectionClosed) as closed:
                    await ws.get_message()
            await process.wait()
    assert draining.status == 503
    assert (rest[-1]["type"], rest[-1]["result"]["text"]) == ("RUN_FINISHED", "released")
    assert closed.value.reason.code == 1001
    assert process.returncode == -signal.SIGTERM  # uvicorn raises the signal it caught again, once shut down


async def _trickle(stream: trio.SocketStream) -> None:
    """A client sending its body a byte at a time, until the server closes the connection."""
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        while True:
            await stream.send_all(b" ")
            await trio.sleep(0.2)


async def test_a_post_agui_body_trickled_in_is_cut_at_the_body_deadline() -> None:
    """A body that never ends in time gets ``408`` and the connection closed, as the native service cuts it
    (here ``BODY_TIMEOUT`` makes the deadline one second)."""
    with trio.fail_after(60):
        async with slow_app(BODY_TIMEOUT="1") as (_process, port):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            head = f"POST /agui HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
            await stream.send_all((head + "content-length: 100000\r\n\r\n").encode())
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_trickle, stream)
                answer = await stream.receive_some(65536)  # the server answers before the body is whole
                nursery.cancel_scope.cancel()
            with contextlib.suppress(trio.BrokenResourceError):  # a reset: a byte of ours met the closed socket
                while chunk := await stream.receive_some(65536):  # until the server closes the connection
                    answer += chunk
            await stream.aclose()
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"within 1s" in answer
