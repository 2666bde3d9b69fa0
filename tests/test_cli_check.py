"""``yao-actors check``, ``yao-actors config schema`` and ``--version`` (issue 12, items 1 and 13)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

import yao_actors
from yao_actors.cli import main
from yao_actors.config import config_schema


def write(tmp_path: Path, data: object) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_check_prints_one_line_per_problem_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path,
        {
            "mcpServers": {"w": {"command": "${YAO_TEST_UNSET_VARIABLE}", "timout": 1}},
            "assistants": {"a": {"model": "demo", "mcp": {"options": {"max_turn": "25", "tool_loop": "false"}}}},
        },
    )
    assert main(["check", "--config", path]) == 2
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[1] for line in lines] == [
        "mcpServers.w.timout",
        "mcpServers.w.command",
        "assistants.a.mcp.options.tool_loop",
        "assistants.a.mcp.options.max_turn",
    ]
    assert all(line.startswith(f"{path}: ") for line in lines)
    assert "environment variable YAO_TEST_UNSET_VARIABLE is not set" in lines[1]


def test_check_resolves_model_references(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, {"models": {}, "assistants": {"a": {"model": "gpt-9"}}})
    assert main(["check", "--config", path]) == 2
    (line,) = capsys.readouterr().out.splitlines()
    assert line == f"{path}: assistants.a.model: unknown model 'gpt-9' (known: demo, direct, test)"


def test_check_of_a_good_file_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, {"mcpServers": {"w": {"command": "python"}}, "models": {"demo": {"provider": "demo"}}})
    assert main(["check", "--config", path]) == 0
    assert capsys.readouterr().out == f"{path}: ok (1 server(s), 1 assistant(s))\n"
    assert main(["check"]) == 0


def test_check_of_a_missing_or_broken_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--config", str(tmp_path / "absent.json")]) == 2
    assert "cannot read the file" in capsys.readouterr().out
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    assert main(["check", "--config", str(tmp_path / "bad.json")]) == 2
    assert "not valid JSON" in capsys.readouterr().out


def test_config_schema_prints_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == config_schema()
    jsonschema.Draft202012Validator.check_schema(printed)


def test_version_from_the_command_and_the_package() -> None:
    assert yao_actors.__version__[0].isdigit()
    done = subprocess.run(
        [sys.executable, "-m", "yao_actors.cli", "--version"], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == f"yao-actors {yao_actors.__version__}"


def test_check_finds_module_servers_in_the_current_directory_as_serve_does(tmp_path: Path) -> None:
    (tmp_path / "check_tools_here.py").write_text(
        "from mcp.server.mcpserver import MCPServer\nserver = MCPServer('x')\n"
    )
    path = write(tmp_path, {"mcpServers": {"here": {"module": "check_tools_here:server"}}})
    # The installed command, as a user runs it: its sys.path starts with its own directory, not the current one.
    command = shutil.which("yao-actors", path=os.path.dirname(sys.executable)) or shutil.which("yao-actors")
    assert command is not None
    done = subprocess.run([command, "check", "--config", path], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"{path}: ok (1 server(s)")
