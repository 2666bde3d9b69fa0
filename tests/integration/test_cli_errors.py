"""Start-up errors of the real ``yao-actors`` command: each one clear line on standard error, a nonzero exit (2 for
bad arguments and bad configuration input), and never a traceback (issue 29 defect 10, issue 34 item 1)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.integration.processes import REPO, clean_environment


def yao_actors_command() -> list[str]:
    """The installed ``yao-actors`` script (what users run), else the module it runs."""
    script = shutil.which("yao-actors")
    return [script] if script else [sys.executable, "-m", "yao_actors.cli"]


def run_cli(*args: str | bytes, tmp_path: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``yao-actors ARGS`` to its end in ``tmp_path`` (its default SQLite file there too)."""
    env = clean_environment(XDG_STATE_HOME=str(tmp_path), PYTHONPATH=os.environ.get("PYTHONPATH", str(REPO)))
    return subprocess.run(
        [*yao_actors_command(), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
        check=False,
    )


def one_error_line(done: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The single line the command wrote on standard error, after checking its exit code and that it wrote no
    traceback."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == code, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_a_config_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes('{\n  "mcpServers": {"météo": {"command": "x"}}\n}\n'.encode("latin-1"))
    expected = f"{path}: line 2 column 20: not UTF-8 text (byte 0xe9); save the file as UTF-8"
    done = run_cli("check", "--config", str(path), tmp_path=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stdout.splitlines() == [expected]  # check's report is its output, one line per problem
    done = run_cli("serve", "--config", str(path), "--store", "memory", "--port", "0", tmp_path=tmp_path)
    assert one_error_line(done) == f"yao-actors: {expected}"
    assert done.stdout == ""
