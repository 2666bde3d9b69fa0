"""The offline models that try a user's own servers, against real servers over stdio: ``direct`` calls exactly
what the user writes (here ``mcp-server-time`` from PyPI, a server nobody here wrote), ``test`` calls only the
tools marked read-only unless the assistant's options say ``include_writes``."""

from __future__ import annotations

import sys
from typing import Any

import trio

from yao_actors import open_runtime
from yao_actors.config import parse_config

TIME = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
RESULTS = {"command": sys.executable, "args": ["-m", "yao_actors.testing.result_servers"]}
#: The result server's annotated tools: read-only, destructive, and not destructive but not read-only either.
ANNOTATED = [{"results": ["lookup", "erase", "note"]}]


def config(assistants: dict[str, Any]) -> Any:
    return parse_config({"mcpServers": {"time": TIME, "results": RESULTS}, "assistants": assistants})


async def test_the_direct_model_calls_what_the_user_writes_and_answers_with_the_results() -> None:
    assistants = {"try": {"model": "direct", "mcp": {"servers": ["time"]}}}
    with trio.fail_after(60):
        async with open_runtime(config(assistants), ready_timeout=30) as runtime:
            script = (
                "call time.get_current_time timezone=UTC\n"
                '{"tool": "time.convert_time", "arguments": {"source_timezone": "UTC", "time": "12:00",'
                ' "target_timezone": "Asia/Tokyo"}}'
            )
            result = await runtime.run("try", script)
            assert result.ok, result
            assert [(r.name, r.ok) for r in result.tool_results] == [
                ("time__get_current_time", True),
                ("time__convert_time", True),
            ]
            assert result.tool_results[1].result["target"]["datetime"].split("T")[1].startswith("21:00")
            assert result.text.startswith('time__get_current_time: {"timezone":"UTC"')

            unknown = await runtime.run("try", "call time.get_time timezone=UTC")
            assert unknown.tool_results == ()
            assert "no tool 'time.get_time' is offered" in unknown.text
            assert "time.get_current_time, time.convert_time" in unknown.text

            not_key_value = await runtime.run("try", "time.get_current_time UTC")
            assert not_key_value.tool_results == ()
            assert "'UTC' is not key=value" in not_key_value.text

            missing = await runtime.run("try", "time.get_current_time")
            assert [(r.name, r.kind) for r in missing.tool_results] == [("time__get_current_time", "invalid_arguments")]
            assert "timezone" in missing.text

            listing = await runtime.run("try", "tools")
            assert "- time.get_current_time: Get current time in a specific timezone" in listing.text


async def test_the_test_model_calls_only_read_only_tools_unless_the_assistant_includes_writes() -> None:
    assistants = {
        "safe": {"model": "test", "mcp": {"servers": ANNOTATED}},
        "all": {"model": "test", "options": {"include_writes": True}, "mcp": {"servers": ANNOTATED}},
    }
    with trio.fail_after(60):
        async with open_runtime(config(assistants), ready_timeout=30) as runtime:
            safe = await runtime.run("safe", "go")
            assert safe.ok, safe
            assert [r.name for r in safe.tool_results] == ["results__lookup"]
            assert "Skipped 2 tool(s) not marked read-only" in safe.text
            assert "results__erase, results__note" in safe.text

            everything = await runtime.run("all", "go")
            assert sorted(r.name for r in everything.tool_results) == [
                "results__erase",
                "results__lookup",
                "results__note",
            ]
            assert "Skipped" not in everything.text
