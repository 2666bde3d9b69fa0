"""``mcpServers.<id>.module``: a Python MCP server from a config file, run in-process as a supervised actor."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.integration import actor_checks
from tests.integration.actor_checks import running
from tests.integration.test_service_readme_example import DOCS, page_example
from tests.module_support import TOOLS_MODULE, ModuleWriter, module_writer
from yao_actors.config import Config, InMemoryTransport, load_config, parse_config
from yao_actors.errors import ConfigError, ErrorKind
from yao_actors.events import Outcome
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.tools.server_actor import ServerState

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleWriter]:
    yield from module_writer(tmp_path, monkeypatch)


def servers(**entries: Any) -> dict[str, Any]:
    return {"mcpServers": entries, "models": {"demo": {"provider": "demo"}}}


def write_config(directory: Path, data: dict[str, Any]) -> Path:
    path = directory / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def problem_of(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as refused:
        parse_config(data)
    (problem,) = refused.value.problems
    return problem


# --------------------------------------------------------------------------- reading the reference


def test_an_mcpserver_attribute_a_factory_and_a_dotted_path_are_servers(write_module: ModuleWriter) -> None:
    name = write_module(
        """
        from mcp.server.lowlevel import Server
        from mcp.server.mcpserver import MCPServer

        server = MCPServer("direct")
        made = []

        def build():
            made.append(MCPServer("built"))
            return made[-1]

        class Registry:
            server = MCPServer("nested")

        low = Server("low")
        """
    )
    config = parse_config(
        servers(
            direct={"module": f"{name}:server", "timeout": 5},
            built={"module": f"{name}:build", "type": "module"},
            nested={"module": f"{name}:Registry.server"},
            low={"module": f"{name}:low"},
        )
    )
    module = write_module.module(name)
    transports = {key: spec.transport for key, spec in config.servers.items()}
    assert all(isinstance(t, InMemoryTransport) for t in transports.values())
    assert transports["direct"] == InMemoryTransport(module.server, f"{name}:server")
    assert transports["direct"].server is module.server
    assert transports["built"].server is module.made[0]  # the factory was called once
    assert len(module.made) == 1
    assert transports["nested"].server is module.Registry.server
    assert transports["low"].server is module.low
    assert config.servers["direct"].timeout == 5


@pytest.mark.parametrize(
    ("source", "attribute", "expected"),
    [
        ("raise RuntimeError('no database')", "server", "cannot import '{m}': RuntimeError: no database"),
        ("import not_installed_dependency_xyz", "server", "ModuleNotFoundError: No module named 'not_installed_"),
        ("def broken(:\n    pass", "server", "cannot import '{m}': SyntaxError"),
        ("import sys\nsys.exit(2)", "server", "cannot import '{m}': SystemExit: 2"),
        ("server = 1", "missing", "{m}:missing: module '{m}' has no attribute 'missing'"),
        ("server = 'a server'", "server", "{m}:server is a str; expected an MCPServer"),
        ("def build():\n    return {'name': 'x'}", "build", "{m}:build() returned a dict; expected an MCPServer"),
        ("def build(name):\n    pass", "build", "calling {m}:build() raised TypeError"),
        ("def build():\n    raise ValueError('no key')", "build", "calling {m}:build() raised ValueError: no key"),
        ("async def build():\n    pass", "build", "{m}:build is an async function"),
    ],
)
def test_a_module_that_gives_no_server_is_a_config_error_naming_the_key_and_the_cause(
    write_module: ModuleWriter, source: str, attribute: str, expected: str
) -> None:
    name = write_module(source)
    problem = problem_of(servers(mine={"module": f"{name}:{attribute}"}))
    assert problem.startswith("mcpServers.mine.module: ")
    assert expected.format(m=name) in problem


def test_a_missing_module_says_where_python_looked() -> None:
    problem = problem_of(servers(mine={"module": "no_such_tools_module_xyz:server"}))
    assert problem.startswith(
        "mcpServers.mine.module: cannot import 'no_such_tools_module_xyz': ModuleNotFoundError: "
        "No module named 'no_such_tools_module_xyz' (put its directory on PYTHONPATH"
    )


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            {"module": "just_a_module"},
            "mcpServers.m.module: expected \"package.module:attribute\", got 'just_a_module'",
        ),
        ({"module": "a:b:c"}, 'mcpServers.m.module: expected "package.module:attribute"'),
        ({"module": 3}, "mcpServers.m.module: expected a non-empty string, got the number 3"),
        ({"module": "json:loads", "command": "python"}, "mcpServers.m: give one of 'command' (stdio), 'url'"),
        ({"module": "json:loads", "url": "http://h"}, "mcpServers.m: give one of 'command' (stdio), 'url'"),
        ({"type": "module"}, "mcpServers.m.type: 'module' needs a 'module'"),
        (
            {"type": "sse", "module": "yao_actors.testing.servers:build_test_server"},
            "mcpServers.m.type: 'sse' does not take a 'module'",
        ),
        ({}, "mcpServers.m: needs 'command' (a stdio server), 'url' (an HTTP or SSE server) or 'module'"),
    ],
)
def test_bad_module_entries_name_the_key_path(entry: dict[str, Any], expected: str) -> None:
    assert problem_of(servers(m=entry)).startswith(expected)


def test_stdio_keys_on_a_module_server_are_refused(write_module: ModuleWriter) -> None:
    name = write_module("from mcp.server.mcpserver import MCPServer\nserver = MCPServer('x')")
    with pytest.raises(ConfigError) as refused:
        parse_config(servers(m={"module": f"{name}:server", "args": ["-v"], "type": "stdio"}))
    assert refused.value.problems == (
        "mcpServers.m.args: not for in-process servers (this server has a 'module')",
        "mcpServers.m.type: 'stdio' does not take a 'module'",
    )


# --------------------------------------------------------------------------- running it


def tools_config(name: str, **options: Any) -> Config:
    entry = {"module": f"{name}:server", "restart": {"backoff": {"initial": 0.01, "max": 1}}} | options
    return parse_config(servers(mine=entry))


async def test_a_raising_tool_is_an_error_result_and_the_next_call_works(write_module: ModuleWriter) -> None:
    name = write_module(TOOLS_MODULE)
    with trio.fail_after(30):
        async with open_runtime(tools_config(name)) as runtime:
            handle = runtime.servers["mine"]
            crashed = await handle.call_tool("explode", {"reason": "disk on fire"})
            refused = await handle.call_tool("refuse", {"reason": "not today"})
            after = await handle.call_tool("shout", {"text": "still here"})
            stats = handle.statistics()
    assert crashed.kind is ErrorKind.TOOL_ERROR
    assert crashed.error == "Error executing tool explode"  # the SDK keeps an unexpected exception's text private
    assert refused.kind is ErrorKind.TOOL_ERROR
    assert refused.error == "Error executing tool refuse: not today"  # a ToolError's message is for the model
    assert after.ok
    assert after.result == "STILL HERE!"
    assert (stats.state, stats.restarts, stats.calls, stats.errors) == (ServerState.READY, 0, 3, 2)


async def test_a_blocking_tool_does_not_delay_a_concurrent_ping(write_module: ModuleWriter) -> None:
    name = write_module(TOOLS_MODULE)
    outcomes: dict[str, Any] = {}
    with trio.fail_after(30):
        async with open_runtime(tools_config(name)) as runtime:
            handle = runtime.servers["mine"]
            released = write_module.module(name).released

            async def blocked() -> None:
                outcomes["block"] = await handle.call_tool("block", {})

            async with trio.open_nursery() as nursery:
                nursery.start_soon(blocked)
                while handle.statistics().in_flight < 1:  # noqa: ASYNC110 -- a counter, no event to wait on
                    await trio.sleep(0.001)
                pong = await handle.call_tool("ping", {})
                still_blocked = "block" not in outcomes and not released.is_set()
                released.set()
    assert pong.result == "pong"
    assert still_blocked
    assert outcomes["block"].result == {"released": True}  # it was still waiting when the ping was answered


async def test_max_concurrency_queues_calls_behind_a_blocking_tool(write_module: ModuleWriter) -> None:
    name = write_module(TOOLS_MODULE)
    outcomes: list[Any] = []
    with trio.fail_after(30):
        async with open_runtime(tools_config(name, max_concurrency=1)) as runtime:
            handle = runtime.servers["mine"]

            async def call(tool: str) -> None:
                outcomes.append((tool, (await handle.call_tool(tool, {})).result))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, "block")
                while handle.statistics().in_flight < 1:  # noqa: ASYNC110
                    await trio.sleep(0.001)
                nursery.start_soon(call, "ping")
                while handle.statistics().queued < 1:  # noqa: ASYNC110
                    await trio.sleep(0.001)
                queued = handle.statistics()
                write_module.module(name).released.set()
    assert (queued.in_flight, queued.queued) == (1, 1)
    assert outcomes == [("block", {"released": True}), ("ping", "pong")]


async def test_a_tool_calling_sys_exit_loses_the_session_and_the_actor_restarts(write_module: ModuleWriter) -> None:
    name = write_module(TOOLS_MODULE)
    with trio.fail_after(30):
        async with open_runtime(tools_config(name)) as runtime:
            handle = runtime.servers["mine"]
            left = await handle.call_tool("leave", {"code": 3})
            await handle.wait_for_state(ServerState.READY)
            after = await handle.call_tool("shout", {"text": "back"})
            stats = handle.statistics()
    assert left.kind is ErrorKind.SERVER_UNAVAILABLE
    assert "a tool of the in-process server called sys.exit(3)" in (left.error or "")
    assert after.result == "BACK!"
    assert stats.restarts == 1


async def test_a_server_whose_start_fails_is_restarted_with_backoff(
    write_module: ModuleWriter, autojump_clock: trio.abc.Clock
) -> None:
    name = write_module(
        """
        import contextlib

        from mcp.server.mcpserver import MCPServer

        starts = []


        @contextlib.asynccontextmanager
        async def lifespan(server):
            starts.append(len(starts) + 1)
            if len(starts) < 3:
                raise ConnectionError("database not ready")
            yield {}


        server = MCPServer("flaky", lifespan=lifespan)


        @server.tool()
        async def ping() -> str:
            return "pong"
        """
    )
    async with open_runtime(tools_config(name)) as runtime:
        handle = runtime.servers["mine"]
        first = handle.statistics()
        early = await handle.call_tool("ping", {})
        await handle.wait_for_state(ServerState.READY)
        pong = await handle.call_tool("ping", {})
        stats = handle.statistics()
    assert first.state is ServerState.RESTARTING
    assert "ConnectionError: database not ready" in (first.last_error or "")
    assert early.kind is ErrorKind.SERVER_UNAVAILABLE  # fails fast while the server is down
    assert pong.result == "pong"
    assert stats.restarts == 2
    assert write_module.module(name).starts == [1, 2, 3]


def memory_test_server(**options: Any) -> Any:
    entry = {"module": "yao_actors.testing.servers:build_test_server"} | options
    return parse_config(servers(t=entry)).servers["t"]


async def test_calls_progress_and_concurrency_as_for_every_server() -> None:
    async with running(memory_test_server()) as handle:
        await actor_checks.check_list_and_call(handle)
        await actor_checks.check_concurrent_calls(handle)
        await actor_checks.check_progress(handle)


async def test_deadlines_and_cancellation_as_for_every_server(autojump_clock: trio.abc.Clock) -> None:
    async with running(memory_test_server(timeout=2)) as handle:
        await actor_checks.check_deadline(handle)
        await actor_checks.check_caller_cancellation(handle, already_cancelled=1)


async def test_samples_from_a_jsonl_directory_reach_the_model(write_module: ModuleWriter, tmp_path: Path) -> None:
    name = write_module(TOOLS_MODULE)
    samples = tmp_path / "samples" / "mine"
    samples.mkdir(parents=True)
    (samples / "shout.jsonl").write_text(
        json.dumps({"name": "loud", "input": {"text": "hi"}, "output": "HI!", "description": "shouting"})
        + "\n{not json\n",
        encoding="utf-8",
    )
    entry = {"module": f"{name}:server", "samples": os.path.join("samples", "mine")}
    data = {
        "mcpServers": {"mine": entry},
        "assistants": {"default": {"model": "m", "mcp": {"servers": ["mine"]}}},
        "models": {"m": {"provider": "test"}},  # replaced by the scripted model below
    }
    seen: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        seen.append(list(messages))
        if messages[-1]["role"] == "tool":
            return Completion(text=f"the tool said {messages[-1]['content']}")
        return Completion(tool_calls=(ToolCall("c1", "mine__shout", '{"text": "你好"}'),))

    config = load_config(write_config(tmp_path, data))
    with trio.fail_after(30):
        async with open_runtime(config, models={"m": FunctionModel(model)}) as runtime:
            result = await runtime.run("default", "喊一下你好")
    assert result.outcome == Outcome.ANSWERED
    assert result.text == 'the tool said "你好!"'
    (samples_message,) = [m["content"] for m in seen[0] if m["role"] == "system" and "Usage Examples" in m["content"]]
    assert "### mine__shout\n\n**Description**: Shout the text back.\n\n" in samples_message
    assert '**Example 1 - loud**:\n- Description: shouting\n- Input: `{"text":"hi"}`\n- Output: `"HI!"`\n' in (
        samples_message
    )
    assert "Example 2" not in samples_message


async def test_the_demo_servers_answer_the_seeds_question_in_one_process() -> None:
    config = load_config(REPO / "examples" / "in_process.json", environ={})
    assert {spec.transport.reference for spec in config.servers.values()} == {  # type: ignore[union-attr]
        "yao_actors.demo.weather:build_server",
        "yao_actors.demo.clothing:build_server",
    }
    with trio.fail_after(30):
        async with open_runtime(config) as runtime:
            result = await runtime.run("default", "北京今天适合穿什么?")
    assert result.outcome == Outcome.ANSWERED
    assert [r.name for r in result.tool_results] == ["weather__get", "clothing__advise"]
    assert "穿厚羽绒服，戴帽子和手套。" in result.text


async def test_the_tools_pages_ten_lines_work_as_written(write_module: ModuleWriter, tmp_path: Path) -> None:
    source = page_example("tools")
    entry_text = re.search(r"```json\n(.*?)```", (DOCS / "tools.md").read_text(encoding="utf-8"), re.S)
    assert entry_text is not None
    name = write_module(source, prefix="my_tools")
    entries = json.loads(entry_text.group(1))["mcpServers"]
    entries["my_tools"]["module"] = entries["my_tools"]["module"].replace("my_tools", name)
    (tmp_path / "samples" / "my_tools").mkdir(parents=True)
    sample = {"name": "short", "input": {"text": "a b"}, "output": {"words": 2}}
    (tmp_path / "samples" / "my_tools" / "count_words.jsonl").write_text(json.dumps(sample), encoding="utf-8")
    config = load_config(write_config(tmp_path, {"mcpServers": entries}), environ={})
    assert config.servers["my_tools"].samples["count_words"][0].name == "short"
    with trio.fail_after(30):
        async with open_runtime(config) as runtime:
            counted = await runtime.servers["my_tools"].call_tool("count_words", {"text": "北京 今天 适合 穿 什么"})
            empty = await runtime.servers["my_tools"].call_tool("count_words", {"text": " "})
    assert counted.result == {"words": 5}
    assert empty.kind is ErrorKind.TOOL_ERROR
    assert empty.error is not None
    assert empty.error.endswith("the text is empty")


UNCONFIGURED_LOGGING = """
import logging, sys
from yao_actors.config import parse_config
from yao_actors.testing.servers import build_test_server
servers = {"a": {"module": sys.argv[1] + ":server"}, "b": {"module": sys.argv[1] + ":build"}}
parse_config({"mcpServers": servers, "models": {"demo": {"provider": "demo"}}})
build_test_server("t")
root = logging.getLogger()
print(len(root.handlers), logging.getLevelName(root.level))
"""


async def test_building_a_module_server_leaves_an_unconfigured_root_logger_as_it_was(
    write_module: ModuleWriter, tmp_path: Path
) -> None:
    # The SDK's MCPServer calls logging.basicConfig(level=INFO) when built: in an application that had not
    # configured logging (a fresh process), every INFO record of the process would start going to stderr.
    name = write_module(
        """
        from mcp.server.mcpserver import MCPServer

        server = MCPServer("at-import")

        def build():
            return MCPServer("by-factory")
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO), os.environ.get("PYTHONPATH", "")])}
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-c", UNCONFIGURED_LOGGING, name], env=env, capture_stdout=True, capture_stderr=True
        )
    assert done.stdout.decode().split() == ["0", "WARNING"], done.stderr.decode()
