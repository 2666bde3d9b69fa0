"""SIGINT at any moment of ``yao-actors serve`` ends it without a traceback (issue 34 item 1: twice in ~20 runs).

The windows were the second the command spends importing (the package's ``__init__`` imported everything before the
command could take the signal) and the start-up before the service serves. Each case runs the real command and
signals it at one moment: while it imports, while its servers start, idle, in the middle of a run, and twice (a run,
then its graceful shutdown). Moments are found from what the process shows (its memory map, its log, its banner, its
port answering, a file the tool writes), never from a sleep: a test that waited a time failed on a loaded machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.processes import REPO, clean_environment, descendants, running
from tests.integration.test_cli_errors import yao_actors_command

#: A module that only the commands import, not the interpreter's start: once it is mapped, ``main`` is running.
COMMANDS_IMPORTING = "_pydantic_core"
#: Modules mapped further in, by attempt: the configuration's (cryptography's), then the stores' (SQLite's).
LATER_IMPORTS = {1: "_rust.abi3.so", 2: "_sqlite3."}
#: Seconds any one moment may take to come (a loaded machine starts slowly).
MOMENT_TIMEOUT = 60.0

SLOW_TOOLS = """
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("slow")


@server.tool(description="Wait a long while.")
async def wait() -> dict[str, bool]:
    Path("run-started").touch()
    await anyio.sleep(60)
    return {"waited": True}
"""

SLOW_CONFIG = {
    "mcpServers": {"slow": {"module": "slow_tools:server", "timeout": 120}},
    "assistants": {"default": {"model": "test", "options": {"include_writes": True}, "mcp": {"servers": ["slow"]}}},
    "server": {"shutdown_grace": 0.5},
}


def environment(tmp_path: Path) -> dict[str, str]:
    return clean_environment(XDG_STATE_HOME=str(tmp_path), PYTHONPATH=os.environ.get("PYTHONPATH", str(REPO)))


def wait_for(what: str, ready: Callable[[], bool], process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + MOMENT_TIMEOUT
    while not ready():
        assert process.poll() is None, f"the service exited before {what}"
        assert time.monotonic() < deadline, f"no {what} within {MOMENT_TIMEOUT}s"
        time.sleep(0.005)


@contextmanager
def serving(tmp_path: Path, *args: str) -> Iterator[tuple[subprocess.Popen[bytes], Path, Path]]:
    """``yao-actors serve ARGS`` in ``tmp_path``, its output in files; yields it and the files. Whatever happens,
    nothing of it is left running."""
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [*yao_actors_command(), "serve", "--store", "memory", "--port", "0", *args],
            cwd=tmp_path,
            env=environment(tmp_path),
            stdout=stdout,
            stderr=stderr,
        )
    try:
        yield process, out, err
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def healthz_answers(banner: str) -> bool:
    """Whether the service the banner names answers ``GET /healthz``."""
    port = banner.split("ws://127.0.0.1:")[1].split("/")[0]
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=MOMENT_TIMEOUT) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def in_the_map(pid: int, name: str) -> bool:
    try:
        return name in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def assert_stopped_cleanly(process: subprocess.Popen[bytes], err: Path, children: set[int]) -> None:
    """Exited by itself, 0 (a graceful stop) or 130 (interrupted before it took the signal), no traceback, and no
    server process of it left."""
    try:
        code = process.wait(timeout=MOMENT_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail("the service did not stop after SIGINT")
    log = err.read_text(errors="replace")
    assert "Traceback" not in log, log
    assert "KeyboardInterrupt" not in log, log
    assert code in (0, 130), log
    assert not [pid for pid in children if running(pid)]


MOMENTS = ["importing", "importing-later", "servers-starting", "idle"]


@pytest.mark.parametrize("moment", MOMENTS)
@pytest.mark.parametrize("attempt", [1, 2])
def test_sigint_while_starting_or_idle(tmp_path: Path, moment: str, attempt: int) -> None:
    with serving(tmp_path) as (process, out, err):
        if moment.startswith("importing"):
            marker = COMMANDS_IMPORTING if moment == "importing" else LATER_IMPORTS[attempt]  # further in
            wait_for(f"{marker} imported", lambda: in_the_map(process.pid, marker), process)
        elif moment == "servers-starting":
            wait_for("a server starting", lambda: "starting → ready" in err.read_text(errors="replace"), process)
        else:
            wait_for("the banner", lambda: "serving" in out.read_text(errors="replace"), process)
            if attempt == 2:  # and serving: its port answers
                wait_for("/healthz answering", lambda: healthz_answers(out.read_text()), process)
        children = descendants(process.pid)
        process.send_signal(signal.SIGINT)
        assert_stopped_cleanly(process, err, children | descendants(process.pid))


@pytest.mark.parametrize("signals", [1, 2])
def test_sigint_in_the_middle_of_a_run(tmp_path: Path, signals: int) -> None:
    """One SIGINT while a tool runs: a graceful shutdown (the run gets ``shutdown_grace``, then its terminal event);
    a second one during that shutdown stops at once. Neither the service nor the client writes a traceback."""
    (tmp_path / "slow_tools.py").write_text(SLOW_TOOLS)
    (tmp_path / "config.json").write_text(json.dumps(SLOW_CONFIG))
    with serving(tmp_path, "--config", "config.json") as (process, out, err):
        wait_for("the banner", lambda: "serving" in out.read_text(errors="replace"), process)
        url = out.read_text().split(" --url ")[1].split()[0].rstrip(",")
        chat = subprocess.Popen(
            [*yao_actors_command(), "chat", "wait", "--url", url],
            cwd=tmp_path,
            env=environment(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            wait_for("the tool's call", (tmp_path / "run-started").exists, process)
            process.send_signal(signal.SIGINT)
            if signals == 2:  # once the graceful shutdown has begun
                wait_for("the shutdown", lambda: "shutting down:" in err.read_text(errors="replace"), process)
                process.send_signal(signal.SIGINT)
            assert_stopped_cleanly(process, err, descendants(process.pid))
            _, chat_err = chat.communicate(timeout=MOMENT_TIMEOUT)
        finally:
            if chat.poll() is None:
                chat.kill()
                chat.wait()
        assert b"Traceback" not in chat_err, chat_err


def test_the_entry_point_imports_only_the_standard_library() -> None:
    """What the ``yao-actors`` script imports before ``main`` runs: nothing that takes long (a KeyboardInterrupt
    there would be Python's traceback, out of the command's reach)."""
    probe = "import sys, yao_actors.cli; print(sorted(m for m in sys.modules if m.startswith(('yao_actors', 'trio'))))"
    done = subprocess.run(
        [sys.executable, "-c", probe], env=environment(REPO), capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "['yao_actors', 'yao_actors.cli']"
