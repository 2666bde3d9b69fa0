"""The stdio transport: a Trio transport of our own over a child process's stdin/stdout.

The child runs in its own process group; the transport keeps its exit code and
the last lines of its stderr (a bounded ring), reports its death, and on exit
makes sure it is dead: close stdin, wait a little, SIGTERM the group, wait,
SIGKILL — shielded and bounded, so a cancelled caller never leaves an orphan.
Lines are bounded too (:class:`LineLimits`): a stderr line is cut at
``stderr`` bytes, and a stdout line (a JSON-RPC message) over ``stdout`` bytes
loses the link, so the server restarts.

No task stands between the session and the pipes (:class:`StdoutReader`, :class:`StdinWriter`): the
session's receive loop reads and parses stdout itself, and a sender writes its message to stdin from its own
task while the pipe has room, so a call costs the scheduler three batches (a task per pipe cost eight).
"""

from __future__ import annotations

import collections
import logging
import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio
import attrs
import mcp.types
import trio
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from yao_actors.specs import StdioTransport
from yao_actors.transports.child_process import report_exit, stop_process, watch_exit
from yao_actors.transports.link import Link
from yao_actors.transports.malformed import unparsed

logger = logging.getLogger(__name__)


@attrs.frozen
class LineLimits:
    """Bytes of one line of a stdio server: ``stdout`` (one JSON-RPC message; a longer one is a protocol
    failure) and ``stderr`` (kept for reports; the rest of a longer line is dropped)."""

    stdout: int = 16 * 1024 * 1024
    stderr: int = 4096


DEFAULT_LINE_LIMITS = LineLimits()


@asynccontextmanager
async def open_stdio_transport(
    params: StdioTransport, link: Link, limits: LineLimits = DEFAULT_LINE_LIMITS, *, name: str | None = None
) -> AsyncIterator[tuple[StdoutReader, StdinWriter]]:
    """Run ``params``' command and yield the MCP streams over its stdin/stdout (``name``: the server's, for logs;
    else its pid).

    The child's death sets ``link.lost`` with its exit code (after its last
    stderr lines were read), also when the session failed first for the stdout
    the dying child closed. On exit the child is stopped for sure, even when
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
    assert isinstance(process.stdin, trio.lowlevel.FdStream)
    assert isinstance(process.stdout, trio.lowlevel.FdStream)
    reader = StdoutReader(process.stdout, link, limits.stdout, repr(name) if name else f"pid {process.pid}")
    writer = StdinWriter(process.stdin, link)
    stderr_done = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.write_backlog)
            nursery.start_soon(_collect_stderr, process, link, stderr_done, limits.stderr)
            nursery.start_soon(watch_exit, process, link, stderr_done)
            try:
                yield reader, writer
            finally:
                writer.close()
                closed_by_child = reader.ended  # before the drain, which reads to the end
                # Reading on (and discarding) keeps a child that is still writing from blocking on a full pipe.
                nursery.start_soon(reader.drain)
                with trio.CancelScope(shield=True):
                    await stop_process(process)
                    if closed_by_child and process.returncode is not None and not link.lost.is_set():
                        # The session failed because the child closed its stdout (it exited) before its exit
                        # was reported: the exit, with its code and last stderr lines, is why the link is lost.
                        await report_exit(process.returncode, link, stderr_done)
                nursery.cancel_scope.cancel()
    finally:
        writer.close()
        with trio.CancelScope(shield=True):
            await stop_process(process)


@attrs.define
class _LineSplitter:
    """Splits a byte stream into lines, keeping at most ``limit`` bytes of each, so memory stays bounded.

    ``cut`` says whether the unfinished line has already gone over ``limit`` (its excess was dropped).
    """

    limit: int
    _partial: bytearray = attrs.field(factory=bytearray)
    cut: bool = False

    def feed(self, chunk: bytes | bytearray) -> list[tuple[bytes | bytearray, bool]]:
        """The lines ``chunk`` finishes (without their newline), each with whether it was cut at ``limit``."""
        *ends, rest = chunk.split(b"\n")
        lines: list[tuple[bytes | bytearray, bool]] = []
        for piece in ends:
            if self._partial or self.cut:
                self._add(piece)
                lines.append((bytes(self._partial), self.cut))
                self._partial.clear()
                self.cut = False
            elif len(piece) > self.limit:
                lines.append((piece[: self.limit], True))
            else:  # a whole line in one chunk, the usual case: no copy through the buffer
                lines.append((piece, False))
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


#: Bytes read from a child's stdout at once.
READ_SIZE = 65536


class StdoutReader:
    """The session's read stream: the child's stdout, one JSON-RPC message a line, read in the session's own task.

    The session's receive loop reads and parses the lines itself (no task between it and the pipe, and no
    read-ahead: a session that is not reading leaves the child's writes in the pipe). A line that is not a
    JSON-RPC message fails the request it answers at once, or is passed on as its parse error, which the session
    drops (:func:`~yao_actors.transports.malformed.unparsed`; ``name`` says whose in the log); a line over ``limit``
    bytes loses ``link`` (the stream cannot be trusted past it) and ends the stream, so the session fails its
    pending requests and supervision restarts the server.
    """

    def __init__(self, stdout: trio.lowlevel.FdStream, link: Link, limit: int, name: str) -> None:
        self._stdout = stdout
        self._name = name
        self._link = link
        self._limit = limit
        self._lines = _LineSplitter(limit)
        self._ready: collections.deque[SessionMessage | Exception] = collections.deque()
        self._ended = False  # end of file, a broken pipe, or a line over the limit
        self._closed = False
        self._waited = True  # whether the last read waited for the pipe (then the next need not yield first)
        self._yielded = True  # whether a scheduler batch has passed since the last message was passed on

    async def receive(self) -> SessionMessage | Exception:
        """The next message (or parse error) from stdout; ``anyio.EndOfStream`` once stdout has ended.

        Between two messages there is always a scheduler batch, as when a task hands them over: what the
        session starts for one (a progress callback's task) runs before it sees the next. A message that
        had to be waited for has had its batch already; only one that was there at once yields first.
        """
        while not self._ready:
            if self._closed:
                raise anyio.ClosedResourceError
            if self._ended:
                raise anyio.EndOfStream
            chunk = await self._read_chunk()
            if not chunk:
                self._ended = True
                continue
            for line, cut in self._lines.feed(chunk):
                if cut:
                    self._overflow()
                    break
                if line and not line.isspace():  # a blank line is no message (isspace copies nothing)
                    self._ready.append(_parse_line(line, self._name))
            if self._lines.cut:
                self._overflow()
        if not self._yielded:
            await trio.lowlevel.checkpoint()
        self._yielded = False
        return self._ready.popleft()

    async def _read_chunk(self) -> bytes:
        """The next bytes of stdout (``b""`` at its end), straight from the pipe when it has them.

        It waits for the pipe only when it is empty, and yields to the scheduler first only after a read that
        did not wait, so a child that writes without pause cannot keep the session's task from others.
        """
        if not self._waited:
            await trio.lowlevel.checkpoint()
            self._yielded = True
        self._waited = False
        while True:
            fd = self._stdout.fileno()  # -1 once closed: asked every time, never kept
            try:
                return os.read(fd, READ_SIZE)
            except BlockingIOError:
                self._waited = self._yielded = True
                try:
                    await trio.lowlevel.wait_readable(fd)
                except (trio.ClosedResourceError, trio.BusyResourceError, OSError):
                    return b""
            except OSError:
                return b""

    @property
    def ended(self) -> bool:
        """Whether stdout has ended: the child closed it (as it does when it exits), or a line went over the limit."""
        return self._ended

    def _overflow(self) -> None:
        self._ended = True
        self._link.mark_lost(f"stdout line over {self._limit} bytes")

    async def drain(self) -> None:
        """Stop passing messages on and read the rest of stdout, discarding it (the child never blocks on it)."""
        self._closed = True
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError):
            while await self._stdout.receive_some():
                pass

    async def aclose(self) -> None:
        """Pass no more messages on (no checkpoint: a session closes it on its way out, cancelled or not)."""
        self._closed = True

    def __aiter__(self) -> StdoutReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> StdoutReader:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _parse_line(line: bytes | bytearray, name: str) -> SessionMessage | Exception:
    try:
        return SessionMessage(mcp.types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return unparsed(line, exc, name)


#: Messages (or the rests of messages) the backlog writer may hold beyond the one it is writing.
BACKLOG_SIZE = 1


class StdinWriter:
    """The session's write stream: each message written to the child's stdin by the sender itself.

    A message the pipe takes whole is written from the sender's own task, with no hop through another task.
    When the pipe is full (the child is not reading), the rest of a message that was partly written, and
    every message after it until the backlog is written, go through the backlog writer task in order: a
    sender then waits for its turn there (bounded backpressure), and a partly written message is always
    finished, so a cancelled sender never leaves half a message in the pipe.
    """

    def __init__(self, stdin: trio.lowlevel.FdStream, link: Link) -> None:
        self._stdin = stdin
        self._link = link
        self._backlog_send, self._backlog_receive = trio.open_memory_channel[bytes](BACKLOG_SIZE)
        self._queued = 0  # messages handed to the backlog writer and not yet written
        self._closed = False

    async def send(self, message: SessionMessage) -> None:
        """Write ``message`` (one line of JSON), or hand it to the backlog writer when the pipe has no room."""
        data = (message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._closed:
            raise anyio.ClosedResourceError
        if not self._queued:
            try:
                written = os.write(self._stdin.fileno(), data)  # -1 once closed: asked every time, never kept
            except BlockingIOError:
                written = 0
            except OSError as exc:
                self._link.mark_lost("the server closed its stdin")
                raise anyio.BrokenResourceError from exc
            if written == len(data):
                return
            if written:
                # The rest must follow at once and whatever happens to the sender: the backlog is empty.
                data = data[written:]
                self._queued += 1
                try:
                    self._backlog_send.send_nowait(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    self._queued -= 1
                    raise anyio.BrokenResourceError from exc
                return
        self._queued += 1
        try:
            await self._backlog_send.send(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._queued -= 1
            raise anyio.BrokenResourceError from exc
        except BaseException:
            self._queued -= 1  # not handed over: a Trio channel's send that raises did not deliver
            raise

    async def write_backlog(self) -> None:
        """The backlog writer: write what the pipe had no room for, in order, waiting for the child to read."""
        async with self._backlog_receive:
            async for data in self._backlog_receive:
                try:
                    await self._stdin.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self._link.mark_lost("the server closed its stdin")
                    self._closed = True
                    return
                finally:
                    self._queued -= 1

    def close(self) -> None:
        """Take no more messages (the backlog writer ends once it has written what it holds)."""
        self._closed = True
        self._backlog_send.close()

    async def aclose(self) -> None:
        """:meth:`close` (no checkpoint: a session closes it on its way out, cancelled or not)."""
        self.close()

    async def __aenter__(self) -> StdinWriter:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


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


def _stderr_text(line: bytes | bytearray, cut: bool, limit: int) -> str:
    text = line.decode(errors="replace").rstrip()
    return f"{text} [line cut at {limit} bytes]" if cut else text
