"""The stdio transport's wire over a real child process: lines in, messages out, a full pipe, a malformed line."""

from __future__ import annotations

import sys

import anyio
import mcp.types
import pytest
import trio
import trio.testing
from mcp.shared.message import SessionMessage

from yao_actors.config import StdioTransport
from yao_actors.transports import Link, open_stdio_transport

#: Waits before reading stdin (so the pipe fills up), then answers each line with its ``i`` and its pad's length.
SLOW_ECHO = """
import json, sys, time
time.sleep(0.3)
for line in sys.stdin:
    params = json.loads(line)["params"]
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "method": "seen", "params": {"i": params["i"], "n": len(params["pad"])}}) + "\\n")
    sys.stdout.flush()
"""

PAD = 40_000  # a few messages more than a pipe's buffer


def script(source: str) -> StdioTransport:
    return StdioTransport(command=sys.executable, args=("-c", source))


def message(i: int) -> SessionMessage:
    notification = mcp.types.JSONRPCNotification(jsonrpc="2.0", method="m", params={"i": i, "pad": "x" * PAD})
    return SessionMessage(notification)


async def seen(read_stream: object, count: int) -> list[tuple[int, int]]:
    received = []
    for _ in range(count):
        item = await read_stream.receive()  # type: ignore[attr-defined]
        assert isinstance(item, SessionMessage), item
        assert isinstance(item.message, mcp.types.JSONRPCNotification)
        params = item.message.params or {}
        received.append((params["i"], params["n"]))
    return received


async def test_messages_wait_for_a_full_pipe_in_order_and_whole() -> None:
    link = Link()
    with trio.fail_after(30):
        async with open_stdio_transport(script(SLOW_ECHO), link) as (read_stream, write_stream):
            for i in range(6):  # the child is not reading yet: the pipe fills, later ones wait their turn
                await write_stream.send(message(i))
            assert await seen(read_stream, 6) == [(i, PAD) for i in range(6)]


async def test_a_sender_cancelled_while_the_pipe_is_full_leaves_no_half_message() -> None:
    link = Link()
    with trio.fail_after(30):
        async with open_stdio_transport(script(SLOW_ECHO), link) as (read_stream, write_stream):
            sent: list[int] = []

            async def send(first: int) -> None:
                for i in range(first, first + 4):
                    await write_stream.send(message(i))
                    sent.append(i)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(send, 0)
                nursery.start_soon(send, 100)
                # Until both wait for the child (the pipe is full; it reads after its 0.3 s), not for a fixed time.
                await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()  # both are waiting for the child, one may be halfway through a message
            await write_stream.send(message(999))
            received = await seen(read_stream, len(sent) + 1)
    assert all(n == PAD for _, n in received)  # every message arrived whole
    assert {i for i, _ in received} >= {*sent, 999}
    assert received[-1] == (999, PAD)


async def test_a_malformed_line_is_passed_on_as_an_error_and_the_stream_goes_on() -> None:
    source = (
        "import sys\n"
        "sys.stdout.write('not json\\n\\n')\n"
        'sys.stdout.write(\'{"jsonrpc": "2.0", "method": "a"}\\n{"jsonrpc": "2.0", "me\')\n'
        "sys.stdout.flush()\n"
        'sys.stdout.write(\'thod": "b"}\\n\')\n'
    )
    link = Link()
    with trio.fail_after(30):
        async with open_stdio_transport(script(source), link) as (read_stream, _):
            items = [item async for item in read_stream]
            with pytest.raises(anyio.EndOfStream):
                await read_stream.receive()
    assert isinstance(items[0], ValueError)
    assert [item.message.method for item in items[1:] if isinstance(item, SessionMessage)] == ["a", "b"]
    assert len(items) == 3


async def test_tasks_started_for_messages_that_came_together_run_in_their_order() -> None:
    """As a task handing messages over would: progress callbacks (tasks the session starts) stay in order.

    Sixteen messages come in one read; the tasks started for each pair must run in the pair's order (without
    a scheduler batch between the two, Trio runs a batch in either order: each pair would be a coin toss).
    """
    lines = "".join(f'{{"jsonrpc": "2.0", "method": "m{i}"}}\n' for i in range(16))
    source = f"import sys\nsys.stdout.write({lines!r})\nsys.stdout.flush()\nsys.stdin.read()\n"
    ran: list[int] = []

    async def record(i: int) -> None:
        ran.append(i)

    with trio.fail_after(30):
        async with open_stdio_transport(script(source), Link()) as (read_stream, _), trio.open_nursery() as nursery:
            # (the child writes all the lines with one write, under the pipe's atomic size: one read takes them)
            for i in range(16):
                await read_stream.receive()
                nursery.start_soon(record, i)
                if i % 2:
                    await trio.testing.wait_all_tasks_blocked()  # the pair's tasks have run before the next pair
    assert ran == list(range(16))


#: Writes a line to stderr and exits 3, leaving a child of its own that holds stderr open: the exit cannot be
#: reported (with the stderr tail) until the transport has stopped the process group.
EXITS_LEAVING_STDERR_OPEN = """
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
sys.stderr.write("DB_PASSWORD=hunter2\\n")
sys.stderr.flush()
sys.exit(3)
"""


async def test_a_session_that_fails_because_the_child_exited_reports_the_exit() -> None:
    """The session sees stdout end and fails (``Connection closed`` during ``initialize``) before the exit is
    reported: the transport still reports the exit, its code and stderr, not a connection that merely closed."""
    link = Link()
    with trio.fail_after(30):
        async with open_stdio_transport(script(EXITS_LEAVING_STDERR_OPEN), link) as (read_stream, _):
            with pytest.raises(anyio.EndOfStream):
                await read_stream.receive()
            assert not link.lost.is_set()  # the exit is not reported yet: the session is first to fail
    assert link.lost.is_set()
    assert (link.reason, link.exit_code) == ("the server process exited", 3)
    assert link.stderr_tail() == "DB_PASSWORD=hunter2"
