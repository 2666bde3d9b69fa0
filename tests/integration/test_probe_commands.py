"""``yao-actors check`` finds what will fail first, ``check --connect`` reaches every server and model once, ``tools``
says which assistant offers which tool and why not, ``call`` calls one (issue 34, items 3, 4 and 6). Real stdio
servers, a real (fake OpenAI) model endpoint over HTTP, a port nothing listens on."""

from __future__ import annotations

import json
import queue
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from yao_actors.cli import main
from yao_actors.cli.call_questions import terminal_input
from yao_actors.cli.probe import open_probe
from yao_actors.config import parse_config
from yao_actors.testing.fake_openai import RecordedRequest, Reply, open_fake_openai

PYTHON = sys.executable
SERVERS = {
    "weather": {"command": PYTHON, "args": ["-m", "yao_actors.demo.weather"]},
    "test": {"command": PYTHON, "args": ["-m", "yao_actors.testing.servers"]},
}
ASSISTANTS = {
    "capped": {"model": "demo", "max_tools": 3, "mcp": {"servers": ["weather", "test"]}},
    "echo": {"model": "demo", "mcp": {"servers": [{"test": ["echo"]}]}},
}


@pytest.fixture
def fake_openai_url() -> Iterator[str]:
    """A fake OpenAI endpoint answering "ok" to every request, served by a Trio run of its own in a thread (the
    commands run ``trio.run`` themselves)."""
    started: queue.Queue[tuple[str, trio.lowlevel.TrioToken, trio.Event]] = queue.Queue()

    def answer(request: RecordedRequest) -> Reply:
        return Reply(text="ok")

    async def serve() -> None:
        stop = trio.Event()
        async with open_fake_openai(answer) as fake:
            started.put((fake.base_url, trio.lowlevel.current_trio_token(), stop))
            await stop.wait()

    thread = threading.Thread(target=trio.run, args=(serve,), daemon=True)
    thread.start()
    url, token, stop = started.get(timeout=30)
    yield url
    trio.from_thread.run_sync(stop.set, trio_token=token)
    thread.join(timeout=30)


def write(tmp_path: Path, data: dict[str, Any], name: str = "config.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_check_names_a_command_not_on_path_and_an_api_key_not_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("YAO_TEST_UNSET_KEY", raising=False)
    data = {
        "mcpServers": {
            "npx": {"command": "yao-no-such-program", "args": ["-y", "x"]},
            "local": {"command": "./server.sh", "cwd": str(tmp_path)},
            "off": {"command": "yao-no-such-program", "disabled": True},
        },
        "models": {
            "remote": {"provider": "openai", "model": "m", "api_key_env": "YAO_TEST_UNSET_KEY"},
            "ollama": {"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:11434/v1",
                       "api_key_env": "YAO_TEST_UNSET_KEY"},
            "unused": {"provider": "openai", "model": "m", "api_key_env": "YAO_TEST_UNSET_KEY"},
        },
        "assistants": {"a": {"model": "remote", "fallback_model": "ollama", "mcp": {"servers": ["npx", "local"]}}},
    }  # fmt: skip
    path = write(tmp_path, data)
    assert main(["check", "--config", path]) == 2
    assert capsys.readouterr().out.splitlines() == [
        f"{path}: mcpServers.npx.command: 'yao-no-such-program' is not on PATH (install it, or give its full path)",
        f"{path}: mcpServers.local.command: './server.sh' does not exist (relative to cwd {str(tmp_path)!r})",
        f"{path}: models.remote.api_key_env: environment variable YAO_TEST_UNSET_KEY is not set, so requests to "
        "https://api.openai.com/v1 go without an API key (set it; for an endpoint that needs none, write "
        '"api_key_env": null)',
    ]
    (tmp_path / "server.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    monkeypatch.setenv("YAO_TEST_UNSET_KEY", "k")
    assert main(["check", "--config", path]) == 2
    assert capsys.readouterr().out.splitlines() == [
        f"{path}: mcpServers.npx.command: 'yao-no-such-program' is not on PATH (install it, or give its full path)",
        f"{path}: mcpServers.local.command: './server.sh' is not executable (chmod +x it)",
    ]


def test_check_connect_reaches_each_server_and_model_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_openai_url: str
) -> None:
    data = {
        "mcpServers": SERVERS | {"gone": {"url": "http://127.0.0.1:1/mcp"}},
        "models": {
            "real": {"provider": "openai", "model": "fake", "base_url": fake_openai_url, "api_key_env": None},
            "away": {"provider": "openai", "model": "x", "base_url": "http://127.0.0.1:1/v1", "api_key_env": None},
        },
        "assistants": ASSISTANTS
        | {"r": {"model": "real", "mcp": {"servers": []}}, "w": {"model": "away", "mcp": {"servers": []}}},
    }
    path = write(tmp_path, data)
    assert main(["check", "--connect", "--timeout", "20", "--config", path]) == 2
    lines = [line.removeprefix(f"{path}: ") for line in capsys.readouterr().out.splitlines()]
    assert lines[:2] == ["server weather: ready, 1 tool(s)", "server test: ready, 10 tool(s)"]
    assert lines[2].startswith("server gone: server 'gone' unavailable: cannot connect to http://127.0.0.1:1/mcp")
    models = sorted(lines[3:5])
    assert models[0].startswith("model away: http://127.0.0.1:1/v1: the connection to the model endpoint")
    assert models[1].startswith(f"model real: {fake_openai_url} answered in ")
    hidden = (
        "test.sleep, test.fail, test.progress, test.crash, test.stats, test.whoami, test.trace_context, test.register"
    )
    capped = (
        f"warning: assistant capped: its max_tools (3) hides 8 tool(s) from the model: {hidden}; choose the tools it "
        'gets with a tools filter in its mcp.servers (e.g. {"test": ["sleep", "fail"]}; `yao-actors tools` lists them '
        "all), or raise its max_tools"
    )
    assert lines[5:] == [capped]
    good = write(tmp_path, {"mcpServers": SERVERS, "assistants": ASSISTANTS}, "good.json")
    assert main(["check", "--connect", "--config", good]) == 0  # a warning, not a problem
    assert capsys.readouterr().out.splitlines()[-2:] == [
        f"{good}: {capped}",
        f"{good}: ok (2 server(s), 2 assistant(s))",
    ]
    assert main(["check", "--connect", "--strict", "--config", good]) == 2  # unless the warnings must be none
    assert capsys.readouterr().out.splitlines()[-2:] == [
        f"{good}: {capped}",
        f"{good}: --strict: 1 warning(s) count as problems",
    ]


def test_tools_says_who_offers_each_tool_and_why_not(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, {"mcpServers": SERVERS, "assistants": ASSISTANTS})
    assert main(["tools", "--config", path, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["servers"] == {
        "weather": {"ok": True, "detail": "ready, 1 tool(s)"},
        "test": {"ok": True, "detail": "ready, 10 tool(s)"},
    }
    tools = {(t["server"], t["tool"]): t for t in listed["tools"]}
    assert len(tools) == 11
    assert tools["weather", "get"]["offered"] == {"capped": "weather__get"}
    assert tools["weather", "get"]["not_offered"] == {"echo": "its server is not in the assistant's mcp.servers"}
    assert tools["test", "echo"]["offered"] == {"capped": "test__echo", "echo": "test__echo"}
    assert tools["test", "add"]["offered"] == {"capped": "test__add"}
    assert tools["test", "sleep"]["not_offered"] == {
        "capped": "past the assistant's max_tools (3)",
        "echo": "not in the assistant's tool list for this server",
    }
    assert main(["tools", "--config", path, "--server", "weather"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "server weather: ready, 1 tool(s)",
        "",
        "weather.get",
        "  capped: offered as weather__get",
        "  echo: not offered: its server is not in the assistant's mcp.servers",
    ]
    unreachable = write(tmp_path, {"mcpServers": {"gone": {"url": "http://127.0.0.1:1/mcp"}}}, "gone.json")
    assert main(["tools", "--config", unreachable]) == 1
    assert capsys.readouterr().err.startswith("server gone: server 'gone' unavailable: cannot connect")
    assert main(["tools", "--config", path, "--server", "nope"]) == 2
    assert capsys.readouterr().err == "yao-actors: --server nope: no such server (known: weather, test)\n"


def test_tools_and_call_name_the_file_a_configuration_problem_is_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, {"mcpServers": {"x": {"command": 5}}}, "bad.json")
    expected = f"yao-actors: {path}: mcpServers.x.command: expected a non-empty string, got the number 5\n"
    assert main(["tools", "--config", path]) == 2
    assert capsys.readouterr().err == expected
    assert main(["call", "--config", path, "x", "y"]) == 2
    assert capsys.readouterr().err == expected


def test_call_calls_one_tool_and_prints_its_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, {"mcpServers": SERVERS | {"off": {"command": "x", "disabled": True}}})
    assert main(["call", "--config", path, "weather", "get", '{"city": "北京"}']) == 0
    assert json.loads(capsys.readouterr().out) == {"city": "Beijing", "temp": 3, "wind": 4, "condition": "sunny"}
    assert main(["call", "--config", path, "test", "fail", '{"message": "no"}']) == 1
    assert capsys.readouterr().err == "yao-actors: tool_error: no\n"
    assert main(["call", "--config", path, "weather", "nope"]) == 2
    assert capsys.readouterr().err == "yao-actors: TOOL nope: server 'weather' has no such tool (its tools: get)\n"
    assert main(["call", "--config", path, "off", "x"]) == 2
    assert capsys.readouterr().err == "yao-actors: SERVER off: the server is disabled in the configuration\n"
    assert main(["call", "--config", path, "ghost", "x"]) == 2
    assert "SERVER ghost: no such server (known: weather, test, off)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["call", "--config", path, "weather", "get", "{city"])
    assert exited.value.code == 2
    assert "ARGUMENTS: not valid JSON" in capsys.readouterr().err


ASKING = {"asking": {"command": PYTHON, "args": ["-m", "yao_actors.testing.asking"], "protocol": "legacy"}}


def test_call_of_a_tool_that_asks_says_what_it_asked_and_why_nobody_answered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a terminal (and without ``--accept-defaults``) the question is declined and said on standard error;
    it used to end the command with exit 1 and nothing said (issue 44 item 9)."""
    path = write(tmp_path, {"mcpServers": ASKING})
    assert main(["call", "--config", path, "asking", "greet"]) == 0
    said = capsys.readouterr()
    assert json.loads(said.out) == {"action": "decline"}
    assert said.err == (
        "yao-actors: tool 'greet' of server 'asking' asks: 'What is your name?'; declined: no terminal to ask on "
        "(--accept-defaults accepts a form with its defaults)\n"
    )
    assert main(["call", "--config", path, "asking", "sign_in", "--accept-defaults"]) == 0
    said = capsys.readouterr()
    assert json.loads(said.out) == {"action": "decline"}
    assert "asks to open https://example.com/login?flow=42; declined: --accept-defaults opens nothing" in said.err


async def test_a_question_asked_on_the_terminal_is_answered_field_by_field_with_the_defaults_filled_in() -> None:
    """``call``'s terminal answers (chat's questions, field by field): an optional field left empty gets its
    ``default`` (SEP-1034) before the answer goes to the server, which validates it."""
    asked: list[str] = []
    replies = iter(["2026-08-01", "2", "window", ""])

    async def ask(question: str) -> str:
        asked.append(question)
        return next(replies)

    config = parse_config({"mcpServers": ASKING})
    with trio.fail_after(30):
        async with open_probe(config, deadline_s=20, input_handler=terminal_input(ask)) as runtime:
            outcome = await runtime.servers["asking"].call_tool("book", {"hotel": "Lakeside"})
    assert outcome.ok, outcome.error
    assert outcome.result == {
        "booked": True, "hotel": "Lakeside", "date": "2026-08-01", "guests": 2, "seat": "window", "breakfast": False,
        "count": 1,
    }  # fmt: skip
    assert len(asked) == 4  # one question a field: a typed value answers it (no "answer?" first)
    assert asked[0].strip().startswith("Date ")


def test_tools_and_check_connect_say_what_of_a_tools_schema_is_not_enforced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refs = "http://127.0.0.1:9"  # nothing listens there; nothing may try
    args = ["-m", "yao_actors.testing.hostile_schemas", "--refs", refs, "--silent", refs, "--file", str(tmp_path / "x")]
    data = {
        "mcpServers": {"hostile": {"command": PYTHON, "args": args}},
        "assistants": {"a": {"model": "demo", "mcp": {"servers": ["hostile"]}}},
    }
    path = write(tmp_path, data)
    remote = f"inputSchema not checked here ($ref '{refs}/secret.json' is not followed: only references inside the"
    assert main(["tools", "--config", path, "--json"]) == 0
    listed = {tool["tool"]: tool["schema_notes"] for tool in json.loads(capsys.readouterr().out)["tools"]}
    assert listed["remote_ref"] == [f"{remote} schema resolve)"]
    assert listed["backreference"] == ["inputSchema pattern '(a)\\\\1' is not enforced: invalid escape sequence: \\1"]
    assert listed["default_question"] == []
    assert main(["tools", "--config", path, "--server", "hostile"]) == 0
    assert f"  schema: {remote} schema resolve)" in capsys.readouterr().out.splitlines()
    assert main(["check", "--connect", "--config", path]) == 0  # the tools still work: not a failure
    lines = capsys.readouterr().out.splitlines()
    assert f"{path}: server hostile: tool 'remote_ref': {remote} schema resolve)" in lines
    assert lines[-1] == f"{path}: ok (1 server(s), 1 assistant(s))"
