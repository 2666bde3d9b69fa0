"""``python server.py --config`` with a ``module:`` server: the user's Python tools inside the real service process.

The model is a real OpenAI-compatible HTTP endpoint on loopback (the fake), the client a real websocket; the tools
module and its samples directory sit next to the config file in the service's working directory, as a user has them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import trio
from trio_websocket import WebSocketConnection

from tests.integration.processes import REPO, descendants
from tests.module_support import COMMON_TOOLS
from tests.service.support import receive, run_frame, send, until_terminal
from yao_actors.cli.chat import open_service_connection
from yao_actors.testing import FakeToolCall, Reply, open_fake_openai
from yao_actors.testing.fake_openai import RecordedRequest
from yao_actors.testing.processes import read_line

TOOLS = (
    COMMON_TOOLS
    + """
    import pathlib
    import time


    @server.tool()
    def wait_for_file(started: str, release: str) -> str:
        # Blocking, as plain Python often is: it says it started, then waits for the release file.
        pathlib.Path(started).touch()
        for _ in range(1000):
            if pathlib.Path(release).exists():
                return "released"
            time.sleep(0.01)
        return "gave up"
"""
)


def _project(tmp_path: Path, model_url: str) -> Path:
    """A user's directory: the tools module, its samples, and the config naming both."""
    (tmp_path / "my_tools.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    samples = tmp_path / "samples"
    samples.mkdir()
    good = {"name": "loud", "input": {"text": "hi"}, "output": "HI!", "description": "shouting"}
    (samples / "shout.jsonl").write_text(json.dumps(good) + "\n{oops\n", encoding="utf-8")
    config = {
        "mcpServers": {"mine": {"module": "my_tools:server", "samples": "samples", "timeout": 30}},
        "models": {"fake": {"provider": "openai", "base_url": model_url, "model": "fake", "api_key_env": None}},
        "assistants": {"default": {"model": "fake", "mcp": {"servers": ["mine"]}}},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def _model(tmp_path: Path) -> Any:
    """The scripted model: a user's word names the tool call; any other turn answers with what it saw last."""
    calls = {
        "shout": FakeToolCall("mine__shout", json.dumps({"text": "你好"}), "c1"),
        "explode": FakeToolCall("mine__explode", json.dumps({"reason": "disk on fire"}), "c1"),
        "wait": FakeToolCall(
            "mine__wait_for_file",
            json.dumps({"started": str(tmp_path / "started"), "release": str(tmp_path / "release")}),
            "c1",
        ),
    }

    def reply(request: RecordedRequest) -> Reply:
        last = request.body["messages"][-1]
        if last["role"] == "user" and last["content"] in calls:
            return Reply(tool_calls=(calls[last["content"]],))
        return Reply(text=f"saw: {last['content']}")

    return reply


async def _results(ws: WebSocketConnection, word: str, run_id: str | None = None) -> tuple[list[str], str]:
    await send(ws, run_frame(word, run_id=run_id or word))
    events = await until_terminal(ws, run_id or word)
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    return [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"], text


async def _wait_answers_ping_while_the_tool_blocks(ws: WebSocketConnection, tmp_path: Path) -> list[dict[str, Any]]:
    await send(ws, run_frame("wait", run_id="wait"))
    while not (tmp_path / "started").exists():  # noqa: ASYNC110 -- the tool runs in another process
        await trio.sleep(0.01)
    await send(ws, {"type": "ping"})
    frames = [await receive(ws)]
    while frames[-1] != {"type": "pong"}:
        frames.append(await receive(ws))
    assert not [f for f in frames if f.get("type") == "TOOL_CALL_RESULT"]  # the tool was still blocked
    (tmp_path / "release").touch()
    return await until_terminal(ws, "wait")


async def test_a_module_server_serves_runs_in_the_service_process(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "YAO_ACTORS_"))}
    stderr = (tmp_path / "stderr.log").open("wb")
    with trio.fail_after(90):
        async with open_fake_openai(_model(tmp_path)) as fake:
            config = _project(tmp_path, fake.base_url)
            process = await trio.lowlevel.open_process(
                [sys.executable, str(REPO / "server.py"), "--config", str(config), "--port", "0"],
                cwd=tmp_path,  # `my_tools` is found in the working directory, as `yao-actors serve` promises
                env=env,
                stdout=subprocess.PIPE,
                stderr=stderr,
            )
            try:
                assert process.stdout is not None
                banner = await read_line(process.stdout)
                match = re.search(r"ws://127\.0\.0\.1:\d+/", banner)
                assert match, banner
                async with open_service_connection(match.group()) as ws:
                    shouted = await _results(ws, "shout")
                    waited = await _wait_answers_ping_while_the_tool_blocks(ws, tmp_path)
                    exploded = await _results(ws, "explode")
                    again = await _results(ws, "shout", "shout-again")  # a stored run's id is never reused
                    children = descendants(process.pid)
                process.send_signal(signal.SIGTERM)
                code = await process.wait()
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
                stderr.close()
    assert shouted == (['"你好!"'], 'saw: "你好!"')
    assert [e["content"] for e in waited if e["type"] == "TOOL_CALL_RESULT"] == ['"released"']
    (error,) = exploded[0]
    assert "Error executing tool explode" in error
    assert again == shouted
    assert children == set()  # one process: the tools run inside the service
    assert code == 0
    first = fake.requests[0].body["messages"]
    (samples_message,) = [m["content"] for m in first if m["role"] == "system" and "Usage Examples" in m["content"]]
    assert '**Example 1 - loud**:\n- Description: shouting\n- Input: `{"text":"hi"}`' in samples_message
    log = (tmp_path / "stderr.log").read_text(encoding="utf-8")
    assert f"samples: {tmp_path / 'samples' / 'shout.jsonl'}:2: not a JSON record" in log
    assert "RuntimeError: disk on fire" in log  # the tool's traceback goes to the log, not to the model
