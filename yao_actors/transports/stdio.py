"""The stdio transport: a Trio transport of our own over a child process's stdin/stdout.

The child runs in its own process group; the transport keeps its exit code and
the last lines of its stderr (a bounded ring), reports its death, and on exit
makes sure it is dead: close stdin, wait a little, SIGTERM the group, wait,
SIGKILL — shielded and bounded, so a cancelled caller never leaves an orphan.
Lines are bounded too (:class:`LineLimits`): a stderr line is cut at
``stderr`` bytes, and a stdout line (a JSON-RPC message) over ``stdout`` bytes
loses the link, so the server restarts.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio
import attrs
import mcp.types
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from yao_actors.specs import StdioTransport
from yao_actors.transports.link import Link

logger = logging.getLogger(__name__)

#: Seconds a stdio server gets to exit after its stdin closes (SDK servers take seconds: do not wait for them).
STDIN_GRACE = 0.2
#: Seconds a stdio server gets to exit after SIGTERM, before SIGKILL.
TERM_GRACE = 1.0
#: Seconds the exit report waits for the last stderr lines of a dead server.
STDERR_FLUSH_WAIT = 0.5


@attrs.frozen
class LineLimits:
    """Bytes of one line of a stdio server: ``stdout`` (one JSON-RPC message; a longer one is a protocol
    failure) and ``stderr`` (kept for reports; the rest of a longer line is dropped)."""

    stdout: int = 16 * 1024 * 1024
    stderr: int = 4096


DEFAULT_LINE_LIMITS = LineLimits()


@asynccontextmanager
async def open_stdio_transport(
    params: StdioTransport, link: Link, limits: LineLimits = DEFAULT_LINE_LIMITS
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
]:
    """Run ``params``' command and yield the MCP streams over its stdin/stdout.

    The child's death sets ``link.lost`` with its exit code (after its last
    stderr lines were read). On exit the child is stopped for sure, even when
    the caller is cancelled. Raises ``OSError`` when the command cannot start.
    """
    process = await trio.lowlevel.open_process(
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**(os.environ if params.inherit_env else get_default_environment()), **params.env},
        cwd=params.cwd,
        start_new_session=True,
    )
    link.pid = process.pid
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    stderr_done = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_pump_stdout, process, read_writer, link, limits.stdout)
            nursery.start_soon(_pump_stdin, process, write_reader, link)
            nursery.start_soon(_collect_stderr, process, link, stderr_done, limits.stderr)
            nursery.start_soon(_watch_exit, process, link, stderr_done)
            try:
                yield read_stream, write_stream
            finally:
                with trio.CancelScope(shield=True):
                    await stop_process(process)
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await stop_process(process)
            await read_stream.aclose()
            await write_stream.aclose()


@attrs.define
class _LineSplitter:
    """Splits a byte stream into lines, keeping at most ``limit`` bytes of each, so memory stays bounded.

    ``cut`` says whether the unfinished line has already gone over ``limit`` (its excess was dropped).
    """

    limit: int
    _partial: bytearray = attrs.field(factory=bytearray)
    cut: bool = False

    def feed(self, chunk: bytes | bytearray) -> list[tuple[bytes, bool]]:
        """The lines ``chunk`` finishes (without their newline), each with whether it was cut at ``limit``."""
        *ends, rest = chunk.split(b"\n")
        lines = []
        for piece in ends:
            self._add(piece)
            lines.append((bytes(self._partial), self.cut))
            self._partial.clear()
            self.cut = False
        self._add(rest)
        return lines

    def rest(self) -> bytes:
        """The unfinished last line (at most ``limit`` bytes of it)."""
        return bytes(self._partial)

    def _add(self, piece: bytes | bytearray) -> None:
        room = self.limit - len(self._partial)
        if len(piece) > room:
            self.cut = True
        self._partial += piece[:room]


async def _pump_stdout(
    process: trio.Process, sink: MemoryObjectSendStream[SessionMessage | Exception], link: Link, limit: int
) -> None:
    """Parse the child's stdout, one JSON-RPC message a line, into the session's read stream.

    A line over ``limit`` bytes loses ``link`` (the stream cannot be trusted past it) and ends the
    read stream, so the session fails its pending requests and supervision restarts the server.
    """
    assert process.stdout is not None
    async with sink:
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            if await _forward_messages(process.stdout, sink, limit):
                link.mark_lost(f"stdout line over {limit} bytes")
    # Reading on (and discarding) keeps a child that is still writing from blocking on a full pipe.
    with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        while await process.stdout.receive_some():
            pass


async def _forward_messages(
    stdout: trio.abc.ReceiveStream, sink: MemoryObjectSendStream[SessionMessage | Exception], limit: int
) -> bool:
    """Send each stdout line's message to ``sink`` until end of file; whether it stopped at a line too long."""
    lines = _LineSplitter(limit)
    while chunk := await stdout.receive_some():
        for line, cut in lines.feed(chunk):
            if cut:
                return True
            if line.strip():
                await sink.send(_parse_line(line))
        if lines.cut:
            return True
    return False


def _parse_line(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(mcp.types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


async def _pump_stdin(process: trio.Process, source: MemoryObjectReceiveStream[SessionMessage], link: Link) -> None:
    """Write the session's messages to the child's stdin."""
    assert process.stdin is not None
    async with source:
        try:
            async for message in source:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                await process.stdin.send_all(data.encode())
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            link.mark_lost("the server closed its stdin")


async def _collect_stderr(process: trio.Process, link: Link, done: trio.Event, limit: int) -> None:
    """Keep the last lines of the child's stderr in ``link.stderr_lines``, each cut at ``limit`` bytes."""
    assert process.stderr is not None
    lines = _LineSplitter(limit)
    try:
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while chunk := await process.stderr.receive_some():
                for line, cut in lines.feed(chunk):
                    text = _stderr_text(line, cut, limit)
                    logger.debug("server pid %s stderr: %s", process.pid, text)
                    link.stderr_lines.append(text)
        if rest := lines.rest():
            link.stderr_lines.append(_stderr_text(rest, lines.cut, limit))
    finally:
        done.set()


def _stderr_text(line: bytes, cut: bool, limit: int) -> str:
    text = line.decode(errors="replace").rstrip()
    return f"{text} [line cut at {limit} bytes]" if cut else text


async def _watch_exit(process: trio.Process, link: Link, stderr_done: trio.Event) -> None:
    """Report the child's death, with its exit code and its last stderr lines."""
    code = await process.wait()
    with trio.move_on_after(STDERR_FLUSH_WAIT):
        await stderr_done.wait()
    link.mark_lost("the server process exited", exit_code=code)


def _signal_group(process: trio.Process, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


async def stop_process(process: trio.Process) -> None:
    """Stop a stdio server for sure: close stdin, then SIGTERM, then SIGKILL its process group.

    Every wait is bounded (``STDIN_GRACE``, ``TERM_GRACE``); call it shielded.
    Idempotent. Whatever is left of the child's process group afterwards is
    killed too.
    """
    if process.stdin is not None:
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await process.stdin.aclose()
    for sig, grace in ((None, STDIN_GRACE), (signal.SIGTERM, TERM_GRACE), (signal.SIGKILL, TERM_GRACE)):
        if process.returncode is not None:
            break
        if sig is not None:
            _signal_group(process, sig)
        with trio.move_on_after(grace):
            await process.wait()
    _signal_group(process, signal.SIGKILL)
