"""``yao-actors chat`` as a conversation, against a real service process with real servers (``mcp-server-time`` from
PyPI, the official ``@modelcontextprotocol/server-everything``) and the offline ``direct`` model: driven through
standard input (a script of lines) and through a pseudo-terminal (as a person types)."""

from __future__ import annotations

import codecs
import fcntl
import json
import os
import pty
import re
import struct
import sys
import termios
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from tests.integration.processes import clean_environment, service_process
from tests.support import require_tool

EVERYTHING = Path(__file__).parents[1] / "node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
TIME = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
CONVERT = "time.convert_time source_timezone=UTC time=12:00 target_timezone=Asia/Tokyo"


@asynccontextmanager
async def service(tmp_path: Path, *, forms: bool = False) -> AsyncIterator[str]:
    """A service whose assistant ``try`` calls what the user writes to the time server (a conversion waits for
    approval) and, with ``forms``, to server-everything; yields its URL."""
    servers: dict[str, object] = {"time": TIME}
    if forms:
        require_tool(str(EVERYTHING) if EVERYTHING.exists() else None, "server-everything (npm ci --prefix tests/node)")
        servers["everything"] = {"command": "node", "args": [str(EVERYTHING), "stdio"]}
    config = {
        "mcpServers": servers,
        "assistants": {
            "try": {"model": "direct", "mcp": {"servers": list(servers)}, "approval": ["time__convert_time"]}
        },
        "store": {"type": "memory"},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    async with service_process(path) as (_, url):
        yield url


async def run_chat(args: list[str], lines: list[str]) -> tuple[int, str, str]:
    """``yao-actors chat ARGS`` with ``lines`` on standard input: code, stdout, stderr."""
    done = await trio.run_process(
        [sys.executable, "-m", "yao_actors.cli", "chat", *args],
        stdin="".join(f"{line}\n" for line in lines).encode(),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=clean_environment(),
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def chat_with_stdin(url: str, lines: list[str], *args: str) -> tuple[int, str, str]:
    """``yao-actors chat --url URL --assistant try ARGS`` with ``lines`` on standard input: code, stdout, stderr."""
    return await run_chat(["--url", url, "--assistant", "try", *args], lines)


async def test_a_conversation_read_from_standard_input_runs_on_one_thread_and_answers_approvals_inline(
    tmp_path: Path,
) -> None:
    with trio.fail_after(90):
        async with service(tmp_path) as url:
            script = ["/help", "call time.get_current_time timezone=UTC", "/tools", CONVERT, "y", "/history", "/quit"]
            code, out, err = await chat_with_stdin(url, [*script, "call time.never_sent"])
            thread = re.search(r"thread (\w+) \(continue it with --thread \1\)", err)
            assert (code, bool(thread)) == (0, True), (out, err)
            assert thread is not None
            later, out_later, err_later = await chat_with_stdin(url, ["/history", CONVERT], "--thread", thread[1])
    lines = out.splitlines()
    assert "› /help" in lines
    assert "  /tools    the tools the assistant is offered now" in lines
    assert "› call time.get_current_time timezone=UTC" in lines
    assert any(line.startswith('✓ time__get_current_time {"timezone":"UTC"} → {"timezone":"UTC"') for line in lines)
    assert "2 tool(s) of assistant try:" in lines
    assert "  time__get_current_time (read-only)" in lines
    approval = next(line for line in lines if line.startswith("Approve calling time__convert_time"))
    assert approval.endswith("? [y/N] y")  # asked inline, answered by the next line
    assert any(line.startswith("✓ time__convert_time") for line in lines)
    assert "user: call time.get_current_time timezone=UTC" in lines  # /history of this thread
    assert sum(line.startswith("— run ") for line in lines) == 3  # the question, the interrupt, the resume
    assert "never_sent" not in out.replace("› call time.never_sent", "")
    assert "› call time.never_sent" not in lines  # /quit left before it

    # The same thread, continued; the input ends while a call waits for approval: said, and exit code 3.
    assert "user: call time.get_current_time timezone=UTC" in out_later.splitlines()
    assert later == 3, (out_later, err_later)
    assert out_later.splitlines()[-1].startswith("⏸ waiting [tool_approval]: Approve calling time__convert_time")
    assert "the run waits for answers nobody gave" in err_later


async def test_one_question_without_a_terminal_shows_the_interrupt_and_exits_3(tmp_path: Path) -> None:
    """The one-question form reads its answers from standard input too; none there: the interrupt is printed."""
    with trio.fail_after(90):
        async with service(tmp_path) as url:
            code, out, err = await chat_with_stdin(url, [], CONVERT)
            declined, declined_out, _ = await chat_with_stdin(url, ["n"], CONVERT)
    assert code == 3, (out, err)
    assert "— interrupt" in out
    assert "⏸ waiting [tool_approval]: Approve calling time__convert_time" in out
    assert declined == 0
    assert "? [y/N] n" in declined_out
    assert "the user declined this call" in declined_out


async def test_a_servers_form_is_answered_field_by_field_from_standard_input(tmp_path: Path) -> None:
    """server-everything's form holds every kind MCP allows: typed values answer it (a bad one is asked again),
    an empty reply takes the default, choices are given by title and sent as their values, multi-selects as
    arrays; ``/decline`` at a field declines the whole form."""
    answers = [
        "call everything.trigger-elicitation-request",
        "Ann Lee",  # name
        "y",  # check
        "",  # firstLine: its default
        "ann@example.com",
        "https://ann.example",
        "2000-01-02",
        "many",  # integer: not one, asked again
        "101",  # above its maximum, asked again
        "7",
        "",  # number: its default
        "Joey",
        "Piano, Drums",  # a multi-select
        "Wonder Woman",  # a titled enum, by title
        "Salmon, 3",  # a titled multi-select, by title and by number
        "Dogs",  # a legacy titled enum (enumNames)
        "call everything.trigger-elicitation-request",
        "/decline",
    ]
    with trio.fail_after(120):
        async with service(tmp_path, forms=True) as url:
            code, out, err = await chat_with_stdin(url, answers)
    assert code == 0, (out, err)
    assert "? Please provide inputs for the following fields: (a form: /decline or /cancel answers it so)" in out
    assert "  Integer (Your favorite integer" in out
    assert "[integer 1..100, optional, default: 42]: many" in out
    assert "[integer 1..100, optional, default: 42] (a whole number): 101" in out
    assert "[integer 1..100, optional, default: 42] (at most 100): 7" in out
    assert "[one or more of Guitar/Piano/Violin/Drums/Bass, comma-separated, optional, default: Guitar]" in out
    assert "[Superman/Green Lantern/Wonder Woman, optional, default: Superman]" in out
    answered, declined = [raw_result(line) for line in out.splitlines() if line.startswith(RESULT_LINE)]
    assert answered == {
        "action": "accept",
        "content": {
            "name": "Ann Lee",
            "check": True,
            "firstLine": "It was a dark and stormy night.",
            "email": "ann@example.com",
            "homepage": "https://ann.example",
            "birthdate": "2000-01-02",
            "integer": 7,
            "number": 3.14,
            "untitledSingleSelectEnum": "Joey",
            "untitledMultipleSelectEnum": ["Piano", "Drums"],
            "titledSingleSelectEnum": "hero-3",
            "titledMultipleSelectEnum": ["fish-2", "fish-3"],
            "legacyTitledEnum": "pet-2",
        },
    }
    assert declined == {"action": "decline"}


#: How the direct model's answer names the tool's result.
RESULT_LINE = "everything__trigger-elicitation-request: "


def raw_result(line: str) -> object:
    """The answer server-everything says it got, from the direct model's line with the tool's result."""
    parts = json.loads(line.removeprefix(RESULT_LINE))
    return json.loads(parts[-1].split("Raw result: ", 1)[1])


class Terminal:
    """A process on a pseudo-terminal: what it printed so far, read until an expected text appears."""

    def __init__(self, master: int) -> None:
        self.stream = trio.lowlevel.FdStream(master)
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.seen = ""

    async def until(self, text: str) -> str:
        """Read until ``text`` appears after what was read before; returns what came up to and including it."""
        start = len(self.seen)
        while text not in self.seen[start:]:
            chunk = await self.stream.receive_some(4096)
            if not chunk:
                raise EOFError(f"the terminal closed before {text!r}: {self.seen[start:]!r}")
            self.seen += self.decoder.decode(chunk)  # a character may arrive split across two reads
        return self.seen[start:]

    async def type(self, line: str) -> None:
        await self.stream.send_all(line.encode() + b"\r")


async def test_a_conversation_on_a_terminal_prompts_and_asks_inline(tmp_path: Path) -> None:
    with trio.fail_after(120):
        async with service(tmp_path, forms=True) as url:
            master, slave = pty.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 400, 0, 0))  # wide: no line scrolls
            process = await trio.lowlevel.open_process(
                [sys.executable, "-m", "yao_actors.cli", "chat", "--url", url, "--assistant", "try"],
                stdin=slave,
                stdout=slave,
                stderr=slave,
                env=clean_environment(TERM="xterm"),
                start_new_session=True,
            )
            os.close(slave)
            terminal = Terminal(master)
            try:
                banner = await terminal.until("› ")
                assert "Type a message, /help for commands, /quit to leave." in banner
                await terminal.type("call time.get_current_time timezone=UTC")
                answer = await terminal.until("› ")
                assert '✓ time__get_current_time {"timezone":"UTC"} →' in answer
                await terminal.type(CONVERT)
                assert "Approve calling time__convert_time" in await terminal.until("[y/N] ")
                await terminal.type("y")
                assert "✓ time__convert_time" in await terminal.until("› ")
                await terminal.type("call everything.trigger-elicitation-request")
                assert "(Your full, legal name) [string]: " in await terminal.until("[string]: ")
                await terminal.type("Ann Lee")  # a value typed at a form's prompt answers it
                for _ in range(12):  # every other field: its default, or left out
                    await terminal.until(": ")
                    await terminal.type("")
                assert "- Name: Ann Lee" in await terminal.until("› ")
                await terminal.type("/quit")
                await terminal.until("continue it with --thread")
                assert await process.wait() == 0
            finally:
                if process.returncode is None:
                    process.kill()
                await process.wait()
                await terminal.stream.aclose()


async def test_chat_serves_a_config_of_its_own_with_the_direct_model(tmp_path: Path) -> None:
    """``yao-actors chat --config FILE --model direct``: no service to start first."""
    config = tmp_path / "mine.json"
    config.write_text(json.dumps({"mcpServers": {"time": TIME}}), encoding="utf-8")
    commands = {
        "one": (["--config", str(config), "--model", "direct", "call time.get_current_time timezone=UTC"], []),
        "talk": (["--config", str(config), "--model", "direct"], ["/tools", "time.get_time"]),
        "demo": (["--model", "direct", "call weather.get city=Beijing"], []),
        "unknown": (["--model", "gpt-nope", "hi"], []),
        "both": (["--model", "direct", "--url", "ws://127.0.0.1:1/", "hi"], []),
    }
    done: dict[str, tuple[int, str, str]] = {}

    async def chat(name: str) -> None:
        done[name] = await run_chat(*commands[name])

    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:  # five separate processes, each serving itself: all at once
            for name in commands:
                nursery.start_soon(chat, name)
    one, talk, demo, unknown, both = (done[name] for name in commands)
    code, out, err = one
    assert code == 0, (out, err)
    assert out.splitlines()[-2].startswith('time__get_current_time: {"timezone":"UTC","datetime":')
    assert "--thread" not in err  # its threads were in memory: nothing to continue
    code, out, err = talk
    assert code == 0, (out, err)
    assert "  time__get_current_time (read-only)" in out.splitlines()
    assert "'time.get_time': no tool 'time.get_time' is offered." in out
    code, out, _ = demo
    assert (code, '✓ weather__get {"city":"Beijing"} → {"city":"Beijing"' in out) == (0, True)
    code, out, err = unknown
    assert code == 2
    assert "assistants.default.model: unknown model 'gpt-nope' (known: default, demo, direct, test)" in err
    code, _, err = both
    assert code == 2
    assert "--url asks a running service; --config and --model serve one here" in err
