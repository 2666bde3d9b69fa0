"""Start-up errors of the real ``yao-actors`` command: each one clear line on standard error, a nonzero exit (2 for
bad arguments and bad configuration input), and never a traceback (issue 29 defect 10, issue 34 item 1)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.integration.processes import REPO, clean_environment
from yao_actors.config import Config, ServiceSpec
from yao_actors.errors import ConfigError
from yao_actors.runtime import open_runtime
from yao_actors.service import open_service
from yao_actors.testing.processes import TEST_SERVER_COMMAND


def yao_actors_command() -> list[str]:
    """The installed ``yao-actors`` script (what users run), else the module it runs."""
    script = shutil.which("yao-actors")
    return [script] if script else [sys.executable, "-m", "yao_actors.cli"]


def run_cli(
    *args: str | bytes, tmp_path: Path, env: Mapping[str, str | bytes] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``yao-actors ARGS`` to its end in ``tmp_path`` (its default SQLite file there too), ``env`` added to
    its environment."""
    environment = {
        os.fsencode(k): os.fsencode(v)
        for k, v in clean_environment(
            XDG_STATE_HOME=str(tmp_path), PYTHONPATH=os.environ.get("PYTHONPATH", str(REPO))
        ).items()
    }
    environment.update({os.fsencode(k): os.fsencode(v) for k, v in (env or {}).items()})
    return subprocess.run(
        [*yao_actors_command(), *args],
        cwd=tmp_path,
        env=environment,
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


def test_serve_on_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        expected = (
            f"yao-actors: cannot listen on 127.0.0.1:{port}: address already in use (another process listens "
            "there: stop it, or choose another --port; 0 picks a free one)"
        )
        done = run_cli("serve", "--store", "memory", "--port", str(port), tmp_path=tmp_path)
        assert one_error_line(done) == expected  # said before any server starts: no other line
        done = run_cli("serve", "--store", "sqlite", "--workers", "2", "--port", str(port), tmp_path=tmp_path)
        assert one_error_line(done) == expected


@pytest.mark.parametrize("port", ["99999", "65536", "-1", "http"])
def test_serve_with_a_port_that_is_not_one(tmp_path: Path, port: str) -> None:
    done = run_cli("serve", "--store", "memory", "--port", port, tmp_path=tmp_path)
    assert one_error_line(done) == (
        f"yao-actors serve: argument --port: expected a port number from 0 to 65535 (0: any free port), got {port} "
        "(usage: yao-actors serve --help)"
    )
    assert done.stdout == ""  # it serves nowhere (99999 used to serve on 34463)


@pytest.mark.parametrize("port", [65536, 99999, -1])
async def test_an_embedded_service_refuses_a_port_that_is_not_one(port: int) -> None:
    async with open_runtime(Config()) as runtime:
        with pytest.raises(ConfigError, match=f"server.port: expected a port number from 0 to 65535 .*got {port}"):
            async with open_service(runtime, ServiceSpec(port=port)):
                pass


CLOSED_URL = "ws://127.0.0.1:9/"  # the discard port: nothing listens there, so nothing could answer either


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([b"chat", b"caf\xe9 ?"], "yao-actors chat: argument question: not UTF-8 text (byte 0xe9 at character 4)"),
        ([b"chat", b"hi", b"--thread", b"t\xff"], "yao-actors chat: argument --thread: not UTF-8 text (byte 0xff "),
        ([b"chat", b"hi", b"--assistant", b"\xc3"], "yao-actors chat: argument --assistant: not UTF-8 text (byte 0xc3"),
        ([b"history", b"\xfe"], "yao-actors history: argument thread: not UTF-8 text (byte 0xfe at character 1)"),
        ([b"serve", b"--host", b"h\xff"], "yao-actors serve: argument --host: not UTF-8 text (byte 0xff at char"),
    ],
)
def test_arguments_that_are_not_utf8(tmp_path: Path, args: list[bytes], expected: str) -> None:
    if args[0] != b"serve":
        args = [*args, b"--url", CLOSED_URL.encode()]
    line = one_error_line(run_cli(*args, tmp_path=tmp_path))
    assert line.startswith(expected), line
    assert line.endswith(f"(usage: yao-actors {args[0].decode()} --help)"), line


def test_a_token_in_the_environment_that_is_not_utf8(tmp_path: Path) -> None:
    done = run_cli("history", "t", "--url", CLOSED_URL, tmp_path=tmp_path, env={"YAO_ACTORS_TOKEN": b"\xff\xfe"})
    line = one_error_line(done)
    assert line.startswith("yao-actors history: $YAO_ACTORS_TOKEN: not UTF-8 text (byte 0xff at character 1)"), line


def test_a_remote_sse_server_that_dies_is_one_line_of_ours(tmp_path: Path) -> None:
    """The MCP SDK logs ~60 lines of traceback at ERROR when an SSE server's stream dies; the service says it in one
    line with the server's id (and its own line about the loss), and no traceback."""
    server = subprocess.Popen(
        [*TEST_SERVER_COMMAND, "--sse", "--port", "0", "--name", "legacy"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    service: subprocess.Popen[str] | None = None
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split()[1]
        config = {"mcpServers": {"legacy": {"type": "sse", "url": url}}, "assistants": {"default": {"model": "test"}}}
        (tmp_path / "config.json").write_text(json.dumps(config))
        log = tmp_path / "stderr"
        with log.open("wb") as stderr:
            service = subprocess.Popen(
                [*yao_actors_command(), "serve", "--config", "config.json", "--store", "memory", "--port", "0"],
                cwd=tmp_path,
                env=clean_environment(PYTHONPATH=os.environ.get("PYTHONPATH", str(REPO))),
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        assert service.stdout is not None
        assert "serving" in service.stdout.readline()
        server.kill()
        deadline = time.monotonic() + 60
        while "server 'legacy' unavailable: the server's event stream ended" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=60) == 0
    finally:
        for process in (server, service):
            if process is not None:
                if process.poll() is None:
                    process.kill()
                process.wait()
                if process.stdout is not None:
                    process.stdout.close()
    text = log.read_text()
    assert "Traceback" not in text, text
    (said,) = [line for line in text.splitlines() if "Error in sse_reader" in line]
    assert said.split(" ", 2)[2] == (
        "WARNING yao_actors.transports.sdk_errors: server 'legacy': the MCP SDK reports: Error in sse_reader: "
        "RemoteProtocolError: peer closed connection without sending complete message body (incomplete chunked "
        "read) server=legacy sdk_logger=mcp.client.sse"
    )
