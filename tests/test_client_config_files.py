"""Configuration files as Claude Desktop, Cursor and VS Code write them (issue 34, item 2): each client's documented
shape is read as it is (``${env:VAR}``, VS Code's ``servers`` and ``type``), what a service cannot do (``inputs`` /
``${input:ID}``, ``${workspaceFolder}``) is one clear error naming where, and a ``disabled`` entry needs none of its
variables. The files that should work start real stdio servers and answer a real call."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from yao_actors.config import HttpTransport, SseTransport, StdioTransport, load_config, parse_config
from yao_actors.errors import ConfigError
from yao_actors.runtime import open_runtime
from yao_actors.tools.server_actor import ServerState

#: claude_desktop_config.json: ``mcpServers``, each a ``command`` with ``args`` and ``env``; no variables.
CLAUDE_DESKTOP: dict[str, Any] = {
    "mcpServers": {
        "weather": {"command": sys.executable, "args": ["-m", "yao_actors.demo.weather"], "env": {"LOG": "1"}},
        "clothing": {"command": sys.executable, "args": ["-m", "yao_actors.demo.clothing"]},
    }
}
#: .cursor/mcp.json: ``mcpServers``, ``${env:NAME}`` and ``${userHome}`` in strings, ``url`` + ``headers``.
CURSOR: dict[str, Any] = {
    "mcpServers": {
        "weather": {
            "command": "${env:PYTHON}",
            "args": ["-m", "yao_actors.demo.weather"],
            "env": {"DATA": "${userHome}${/}data", "TOKEN": "${env:WEATHER_TOKEN}"},
        },
        "context7": {"url": "https://mcp.context7.com/mcp", "headers": {"CONTEXT7_API_KEY": "${env:CONTEXT7_API_KEY}"}},
        "off": {"command": "npx", "args": ["${workspaceFolder}", "${env:NEVER_SET}"], "disabled": True},
    }
}
#: .vscode/mcp.json: ``servers`` with a ``type`` each, ``inputs`` (values VS Code prompts for), ``envFile``.
VSCODE: dict[str, Any] = {
    "inputs": [{"type": "promptString", "id": "github_mcp_pat", "description": "GitHub Personal Access Token",
                "password": True}],
    "servers": {
        "weather": {"type": "stdio", "command": "${env:PYTHON}", "args": ["-m", "yao_actors.demo.weather"],
                    "envFile": "${workspaceFolder}/.env"},
        "clothing": {"type": "stdio", "command": "${env:PYTHON}", "args": ["-m", "yao_actors.demo.clothing"]},
        "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/",
                   "headers": {"Authorization": "Bearer ${env:GITHUB_TOKEN}"}},
        "legacy": {"type": "sse", "url": "http://127.0.0.1:8001/sse"},
    },
}  # fmt: skip
ENV = {"PYTHON": sys.executable, "WEATHER_TOKEN": "w", "CONTEXT7_API_KEY": "c7", "GITHUB_TOKEN": "gh"}


def written(tmp_path: Path, name: str, data: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def problems_of(data: Any, environ: dict[str, str] = ENV) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, environ=environ)
    return list(caught.value.problems)


async def answers_a_real_call(tmp_path: Path, data: dict[str, Any], environ: dict[str, str]) -> None:
    """The file's stdio servers start (those at a URL are left out: no network here), and the weather server answers
    a call."""
    section = "servers" if "servers" in data else "mcpServers"
    local = data | {section: {key: entry for key, entry in data[section].items() if "url" not in entry}}
    config = load_config(written(tmp_path, "local.json", local), environ=environ)
    async with open_runtime(config) as runtime:
        with trio.fail_after(30):
            await runtime.servers["weather"].wait_for_state(ServerState.READY)
            outcome = await runtime.servers["weather"].call_tool("get", {"city": "Beijing"})
    assert outcome.ok, outcome.error
    assert "Beijing" in json.dumps(outcome.result, ensure_ascii=False)


async def test_a_claude_desktop_file_works_as_it_is(tmp_path: Path) -> None:
    await answers_a_real_call(tmp_path, CLAUDE_DESKTOP, {})


async def test_a_cursor_file_with_env_references_works_as_it_is(tmp_path: Path) -> None:
    path = written(tmp_path, "mcp.json", CURSOR)
    config = load_config(path, environ=ENV)
    weather = config.servers["weather"].transport
    assert isinstance(weather, StdioTransport)
    assert weather.command == sys.executable
    assert weather.env == {"DATA": str(Path.home() / "data"), "TOKEN": "w"}
    assert config.servers["context7"].transport == HttpTransport(
        "https://mcp.context7.com/mcp", {"CONTEXT7_API_KEY": "c7"}
    )
    off = config.servers["off"]
    assert off.disabled  # its variables were not needed: kept as written, never used
    assert isinstance(off.transport, StdioTransport)
    assert off.transport.args == ("${workspaceFolder}", "${env:NEVER_SET}")
    await answers_a_real_call(tmp_path, CURSOR, ENV)


async def test_a_vscode_file_is_read_from_its_servers_section(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = {**VSCODE, "inputs": []}  # the inputs no entry names: nothing to prompt for
    path = written(tmp_path, "mcp.json", data)
    with caplog.at_level(logging.WARNING, logger="yao_actors.config.sections"):
        config = load_config(path, environ=ENV)
    assert list(config.servers) == ["weather", "clothing", "github", "legacy"]
    assert config.servers["github"].transport == HttpTransport(
        "https://api.githubcopilot.com/mcp/", {"Authorization": "Bearer gh"}
    )
    assert config.servers["legacy"].transport == SseTransport("http://127.0.0.1:8001/sse")
    assert [ref.server_id for ref in config.assistants["default"].servers] == list(config.servers)
    assert [r.getMessage() for r in caplog.records] == [
        "servers.weather.envFile: a key of other MCP clients' files, accepted and not used here"
    ]
    await answers_a_real_call(tmp_path, data, ENV)


def test_a_vscode_input_reference_says_to_set_it_in_the_environment(caplog: pytest.LogCaptureFixture) -> None:
    data = {
        "inputs": VSCODE["inputs"],
        "servers": {"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/",
                               "headers": {"Authorization": "Bearer ${input:github_mcp_pat}"}}},
    }  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="yao_actors.config.sections"):
        problems = problems_of(data)
    assert problems == [
        "servers.github.headers.Authorization: ${input:github_mcp_pat} ('GitHub Personal Access Token'): VS Code's "
        "prompted inputs are not supported here; set the value in an environment variable and write ${env:NAME} "
        "instead"
    ]
    assert any(r.getMessage().startswith("inputs: VS Code's prompted inputs are not supported") for r in caplog.records)
    undeclared = {"servers": {"s": {"command": "x", "args": ["${input:token}"]}}}
    assert problems_of(undeclared) == [
        "servers.s.args[0]: ${input:token}: VS Code's prompted inputs are not supported here; set the value in an "
        "environment variable and write ${env:NAME} instead"
    ]
    assert problems_of({"servers": {"s": {"command": "x", "args": ["${command:pick}"]}}}) == [
        "servers.s.args[0]: ${command:pick}: VS Code's ${command:...} variables are not supported here; use ${env:NAME}"
    ]


@pytest.mark.parametrize("name", ["workspaceFolder", "workspaceFolderBasename", "workspaceRoot"])
def test_a_workspace_variable_is_an_error_saying_what_to_write(name: str) -> None:
    data = {"mcpServers": {"fs": {"command": "npx", "args": ["-y", "server-filesystem", f"${{{name}}}/src"]}}}
    assert problems_of(data) == [
        f"mcpServers.fs.args[2]: ${{{name}}} is an editor's workspace variable, and a service has no workspace: "
        "write the path (relative paths are from the directory yao-actors runs in), or ${env:NAME} with NAME set"
    ]
    assert parse_config(data | {"mcpServers": {"fs": {**data["mcpServers"]["fs"], "disabled": True}}}).servers


def test_env_forms_are_one_and_the_same() -> None:
    env = {"A": "1"}
    data = {"mcpServers": {"s": {"command": "x", "args": ["${A}", "${env:A}", "${env:B:-2}", "${B:-3}", "$A", "${}"]}}}
    transport = parse_config(data, environ=env).servers["s"].transport
    assert isinstance(transport, StdioTransport)
    assert transport.args == ("1", "1", "2", "3", "$A", "${}")
    assert problems_of({"mcpServers": {"s": {"command": "${env:NOPE}"}}}, {}) == [
        "mcpServers.s.command: environment variable NOPE is not set"
    ]


def test_a_disabled_entry_needs_none_of_its_variables_and_an_enabled_one_all() -> None:
    entry = {"url": "https://h.test/mcp", "headers": {"A": "${TOKEN}", "B": "${input:key}"}}
    config = parse_config({"mcpServers": {"s": {**entry, "disabled": True}}}, environ={})
    assert config.servers["s"].disabled
    assert config.assistants["default"].servers == ()
    assert [p.split(":")[0] for p in problems_of({"mcpServers": {"s": entry}}, {})] == [
        "mcpServers.s.headers.A",
        "mcpServers.s.headers.B",
    ]


def test_mcp_servers_and_servers_together_are_refused() -> None:
    data = {"mcpServers": {"a": {"command": "x"}}, "servers": {"b": {"command": "y"}}}
    assert problems_of(data) == ["servers: give 'mcpServers' or VS Code's 'servers' (read the same), not both"]


def test_a_gallery_server_id_gets_a_name_to_use_instead() -> None:
    data = {"servers": {"github/github-mcp-server": {"type": "http", "url": "https://api.githubcopilot.com/mcp/",
                                                     "gallery": True, "version": "0.13.0"}}}  # fmt: skip
    assert problems_of(data) == [
        "servers.github/github-mcp-server: a server id must start with a letter or digit and use only letters, "
        "digits, '.', '_', '-' (it names the server's tools, server__tool): rename it, e.g. "
        "'github-github-mcp-server'"
    ]
