"""Configuration files as Claude Desktop, Cursor and VS Code write them (issue 34, item 2; issue 44, item 5): each
client's documented shape is read as it is (``${env:VAR}``, VS Code's ``servers`` and ``type``, ``envFile``), a
client's whole file has its other settings ignored with one note, what a service cannot do (``inputs`` /
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

from yao_actors.cli import main
from yao_actors.cli.client_files import Places, config_argument
from yao_actors.config import HttpTransport, SseTransport, StdioTransport, load_config, parse_config
from yao_actors.errors import ConfigError
from yao_actors.runtime import open_runtime
from yao_actors.tools.server_actor import ServerState
from yao_actors.transports import Link, open_stdio_transport

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
                    "envFile": ".env"},
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


async def test_a_vscode_file_is_read_from_its_servers_section(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = {**VSCODE, "inputs": []}  # the inputs no entry names: nothing to prompt for
    path = written(tmp_path, "mcp.json", data)
    monkeypatch.chdir(tmp_path)  # the workspace: a relative envFile is from where yao-actors runs
    (tmp_path / ".env").write_text("UNITS=metric\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="yao_actors.config.load"):
        config = load_config(path, environ=ENV)
    assert list(config.servers) == ["weather", "clothing", "github", "legacy"]
    assert config.servers["github"].transport == HttpTransport(
        "https://api.githubcopilot.com/mcp/", {"Authorization": "Bearer gh"}
    )
    assert config.servers["legacy"].transport == SseTransport("http://127.0.0.1:8001/sse")
    assert [ref.server_id for ref in config.assistants["default"].servers] == list(config.servers)
    weather = config.servers["weather"].transport
    assert isinstance(weather, StdioTransport)
    assert weather.env == {"UNITS": "metric"}
    assert [r.getMessage() for r in caplog.records] == []  # every key read: nothing to note
    await answers_a_real_call(tmp_path, data, ENV)


def test_a_vscode_input_reference_says_to_set_it_in_the_environment() -> None:
    data = {
        "inputs": VSCODE["inputs"],
        "servers": {"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/",
                               "headers": {"Authorization": "Bearer ${input:github_mcp_pat}"}}},
    }  # fmt: skip
    problems = problems_of(data)
    assert problems == [
        "servers.github.headers.Authorization: ${input:github_mcp_pat} ('GitHub Personal Access Token'): VS Code's "
        "prompted inputs are not supported here; set the value in an environment variable and write ${env:NAME} "
        "instead"
    ]
    unused = parse_config({"inputs": VSCODE["inputs"], "servers": {}}, environ=ENV)
    assert [note.split(":")[0] for note in unused.notes] == ["inputs"]
    assert "VS Code's prompted inputs are not supported" in unused.notes[0]
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


#: A complete claude_desktop_config.json as Claude Desktop writes it: its own settings beside ``mcpServers``.
CLAUDE_DESKTOP_WHOLE: dict[str, Any] = {
    "globalShortcut": "Alt+Space",
    "mcpServers": CLAUDE_DESKTOP["mcpServers"],
    "preferences": {"quickEntryShortcut": "double-tap-option", "menuBarEnabled": False},
    "isUsingBuiltInNodeForMcp": True,
}
WHOLE_FILE_NOTE = (
    "globalShortcut, preferences, isUsingBuiltInNodeForMcp: another MCP client's settings, ignored (of a client's "
    "whole file, only its mcpServers are read)"
)


async def test_a_complete_claude_desktop_file_is_read_with_one_note_on_its_other_settings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = written(tmp_path, "claude_desktop_config.json", CLAUDE_DESKTOP_WHOLE)
    with caplog.at_level(logging.WARNING, logger="yao_actors.config.load"):
        config = load_config(path)
    assert list(config.servers) == ["weather", "clothing"]
    assert config.notes == (WHOLE_FILE_NOTE,)
    assert [r.getMessage() for r in caplog.records] == [f"{path}: {WHOLE_FILE_NOTE}"]  # named like its errors
    await answers_a_real_call(tmp_path, CLAUDE_DESKTOP_WHOLE, {})


def test_an_unknown_top_level_key_of_this_runtimes_own_file_stays_an_error() -> None:
    """A file with this runtime's own sections is not another client's: a typo in it is not ignored."""
    data = {**CLAUDE_DESKTOP, "assistants": {}, "globalShortcut": "Alt+Space"}
    assert problems_of(data) == [
        "globalShortcut: unknown key (allowed: mcpServers, servers, inputs, models, assistants, server, prompts, store)"
    ]


def test_check_warns_of_a_whole_files_other_settings_and_strict_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--config claude`` finds Claude Desktop's file where it keeps it (on Linux, as here: under $XDG_CONFIG_HOME),
    says which file it read, and ``check`` says the note as a warning, which ``--strict`` makes fail."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "config" / "Claude" / "claude_desktop_config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(CLAUDE_DESKTOP_WHOLE), encoding="utf-8")
    assert main(["check", "--config", "claude"]) == 0
    out, err = capsys.readouterr()
    assert err == f"yao-actors: --config claude: reading Claude Desktop's file {path}\n"
    assert out.splitlines() == [f"{path}: warning: {WHOLE_FILE_NOTE}", f"{path}: ok (2 server(s), 1 assistant(s))"]
    assert main(["check", "--strict", "--config", "claude"]) == 2
    assert capsys.readouterr().out.splitlines()[-1] == f"{path}: --strict: 1 warning(s) count as problems"
    with pytest.raises(SystemExit) as refused:
        main(["check", "--config", "cursor"])
    assert refused.value.code == 2
    assert capsys.readouterr().err == (
        f"yao-actors check: argument --config: no Cursor file found (looked at {tmp_path}/.cursor/mcp.json, "
        f"{tmp_path}/home/.cursor/mcp.json); give the file's path instead (usage: yao-actors check --help)\n"
    )


@pytest.mark.parametrize(
    ("platform", "claude", "vscode_user"),
    [
        ("darwin", "H/Library/Application Support/Claude", "H/Library/Application Support/Code/User"),
        ("win32", "A/Claude", "A/Code/User"),
        ("linux", "X/Claude", "X/Code/User"),
    ],
)
def test_each_clients_file_is_looked_for_where_that_client_keeps_it(
    platform: str, claude: str, vscode_user: str
) -> None:
    places = Places(Path("H"), Path("W"), platform, {"APPDATA": "A", "XDG_CONFIG_HOME": "X"})
    assert places.candidates("claude") == [Path(claude) / "claude_desktop_config.json"]
    assert places.candidates("cursor") == [Path("W/.cursor/mcp.json"), Path("H/.cursor/mcp.json")]
    assert places.candidates("vscode") == [Path("W/.vscode/mcp.json"), Path(vscode_user) / "mcp.json"]


def test_the_workspaces_file_comes_before_the_users_and_a_file_named_like_a_client_is_that_file(
    tmp_path: Path,
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    places = Places(home, work, "linux", {})
    for path in (home / ".cursor" / "mcp.json", work / ".cursor" / "mcp.json"):
        path.parent.mkdir(parents=True)
        path.write_text("{}", encoding="utf-8")
    assert config_argument("cursor", places) == (
        str(work / ".cursor" / "mcp.json"),
        f"--config cursor: reading Cursor's file {work / '.cursor' / 'mcp.json'}",
    )
    (work / ".cursor" / "mcp.json").unlink()
    assert config_argument("cursor", places)[0] == str(home / ".cursor" / "mcp.json")
    (work / "cursor").write_text("{}", encoding="utf-8")
    assert config_argument("cursor", places) == ("cursor", None)
    assert config_argument("my.json", places) == ("my.json", None)


ENV_REPORT = (
    "import os, sys; "
    "sys.stderr.write(os.environ.get('DB_URL', 'absent') + ' ' + os.environ.get('MODE', 'absent') + '\\n'); "
    "sys.exit(3)"
)


async def test_a_cursor_env_file_reaches_the_server_and_its_own_env_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cursor's ``envFile`` is read, not ignored: a real child process sees its variables (``env`` wins a tie)."""
    env_file = tmp_path / "server.env"
    env_file.write_text(
        "# the database\nexport DB_URL='postgres://u:p@db/x'\nMODE=file  # a comment\n\nLOG=\"a\\tb\"\n",
        encoding="utf-8",
    )
    entry = {"command": sys.executable, "args": ["-c", ENV_REPORT], "envFile": str(env_file), "env": {"MODE": "env"}}
    config = parse_config({"mcpServers": {"db": entry}}, environ={})
    transport = config.servers["db"].transport
    assert isinstance(transport, StdioTransport)
    assert transport.env == {"DB_URL": "postgres://u:p@db/x", "MODE": "env", "LOG": "a\tb"}
    assert config.notes == ()  # read, so nothing to note
    link = Link()
    with trio.fail_after(30):
        async with open_stdio_transport(transport, link):
            await link.lost.wait()
    assert link.stderr_tail().strip() == "postgres://u:p@db/x env"


def test_an_env_file_that_cannot_be_read_or_has_a_bad_line_is_a_problem_naming_both(tmp_path: Path) -> None:
    bad = tmp_path / "bad.env"
    bad.write_text("GOOD=1\nthis is not a variable\n", encoding="utf-8")
    quoted = tmp_path / "quoted.env"
    quoted.write_text("A='never closed\n", encoding="utf-8")
    entries = {
        "missing": {"command": "x", "envFile": str(tmp_path / "none.env")},
        "bad": {"command": "x", "envFile": str(bad)},
        "quoted": {"command": "x", "envFile": str(quoted)},
        "off": {"command": "x", "envFile": str(tmp_path / "none.env"), "disabled": True},
    }
    assert problems_of({"mcpServers": entries}) == [
        f"mcpServers.missing.envFile: cannot read {str(tmp_path / 'none.env')!r}: No such file or directory",
        f"mcpServers.bad.envFile: {str(bad)!r} line 2: expected NAME=value, got 'this is not a variable'",
        f'mcpServers.quoted.envFile: {str(quoted)!r} line 1: expected NAME=value, got "A=\'never closed"',
    ]
