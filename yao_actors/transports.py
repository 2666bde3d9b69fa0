"""Turn a ``ServerSpec`` into a connected ``mcp.Client``, handling the SDK traps once (DESIGN §8).

``open_client(spec, link=...)`` is the one way a server actor connects. It yields
an entered ``mcp.Client`` and reports, through the :class:`Link` it was given,
when the connection is lost as a whole and why:

- **stdio**: a Trio transport of our own. The child runs in its own process
  group; the transport keeps its exit code and the last lines of its stderr (a
  bounded ring), reports its death, and on exit makes sure it is dead: close
  stdin, wait a little, SIGTERM the group, wait, SIGKILL — shielded and bounded,
  so a cancelled caller never leaves an orphan. Lines are bounded too: a stderr
  line is cut at ``STDERR_LINE_LIMIT`` bytes, and a stdout line (a JSON-RPC
  message) over ``STDOUT_LINE_LIMIT`` loses the link, so the server restarts.
- **streamable HTTP**: ``streamable_http_client`` over an ``httpx2`` client whose
  transport turns network errors into ``503`` responses, so one failed request
  fails one call instead of the whole session (python-sdk #915). The session
  failing as a whole is still detected: a refused connection, or ``404`` for a
  session the server no longer knows (it restarted), loses the link.
- **in-memory**: ``mcp.Client(server_object)``.

The client is pinned to ``mode="legacy"`` (the initialize handshake): no 10 s
``server/discover`` probe can stall a start, and cancellation
(``notifications/cancelled``), progress and ``notifications/tools/list_changed``
work the same way on every transport. The response cache is off: the actor keeps
the catalog itself.
"""

from __future__ import annotations

import collections
import importlib.metadata
import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from typing import Any

import anyio
import attrs
import httpx2
import mcp
import mcp.types
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client._transport import TransportStreams
from mcp.client.session import MessageHandlerFnT
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from yao_actors.config import HttpTransport, InMemoryTransport, ServerSpec, StdioTransport

logger = logging.getLogger(__name__)


#: Lines of a stdio server's stderr kept for error reports.
STDERR_TAIL_LINES = 20
#: Bytes of one stdout line (one JSON-RPC message) of a stdio server; a longer line is a protocol failure.
STDOUT_LINE_LIMIT = 16 * 1024 * 1024
#: Bytes of one stderr line of a stdio server kept; the rest of a longer line is dropped.
STDERR_LINE_LIMIT = 4096
#: Seconds a stdio server gets to exit after its stdin closes (SDK servers take seconds: do not wait for them).
STDIN_GRACE = 0.2
#: Seconds a stdio server gets to exit after SIGTERM, before SIGKILL.
TERM_GRACE = 1.0
#: Seconds the exit report waits for the last stderr lines of a dead server.
STDERR_FLUSH_WAIT = 0.5
#: JSON-RPC error code of the answer :class:`ResilientTransport` makes up for a request the network failed
#: (in the range JSON-RPC leaves to implementations, and used by neither MCP nor its SDK).
TRANSPORT_FAILURE = -32050
#: HTTP timeouts: a response stream may stay open while a tool runs; call deadlines are the actor's.
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


def _client_info() -> mcp.types.Implementation:
    try:
        version = importlib.metadata.version("yao-actors")
    except importlib.metadata.PackageNotFoundError:
        version = "0+unknown"
    return mcp.types.Implementation(name="yao-actors", version=version)


CLIENT_INFO = _client_info()


@attrs.define(eq=False)
class Link:
    """What one connection tells its owner about its own health.

    ``lost`` is set once the connection is gone as a whole; ``reason``,
    ``exit_code`` and ``stderr_tail()`` say why. ``pid`` is the stdio child's pid.
    """

    lost: trio.Event = attrs.field(factory=trio.Event)
    reason: str | None = None
    exit_code: int | None = None
    pid: int | None = None
    stderr_lines: collections.deque[str] = attrs.field(factory=lambda: collections.deque(maxlen=STDERR_TAIL_LINES))

    def lose(self, reason: str, *, exit_code: int | None = None) -> None:
        """Record the first reason the connection was lost, and wake whoever waits on ``lost``."""
        if self.lost.is_set():
            return
        self.reason = reason
        if exit_code is not None:
            self.exit_code = exit_code
        self.lost.set()

    def stderr_tail(self) -> str:
        """The last lines the server wrote to stderr."""
        return "\n".join(self.stderr_lines)


@asynccontextmanager
async def open_client(
    spec: ServerSpec, *, link: Link, message_handler: MessageHandlerFnT | None = None
) -> AsyncIterator[mcp.Client]:
    """Connect to ``spec``'s server; yield the entered client. Enter and exit in one task."""
    async with _open_transport(spec.transport, link) as target:
        client = mcp.Client(
            target,
            mode="legacy",
            client_info=CLIENT_INFO,
            cache=None,
            message_handler=message_handler,
        )
        async with client:
            yield client


@asynccontextmanager
async def _open_transport(
    transport: StdioTransport | HttpTransport | InMemoryTransport, link: Link
) -> AsyncIterator[Any]:
    """What ``mcp.Client`` connects to: transport streams, or the in-process server itself."""
    match transport:
        case StdioTransport():
            async with open_stdio_transport(transport, link) as streams:
                yield _Streams(streams)
        case HttpTransport():
            async with (
                httpx2.AsyncClient(
                    headers=dict(transport.headers),
                    timeout=HTTP_TIMEOUT,
                    transport=ResilientTransport(httpx2.AsyncHTTPTransport(), link),
                ) as http_client,
                streamable_http_client(transport.url, http_client=http_client) as streams,
            ):
                yield _Streams(streams)
        case InMemoryTransport():
            yield transport.server


@attrs.frozen
class _Streams(AbstractAsyncContextManager[TransportStreams]):
    """An already open pair of streams, as the ``Transport`` context manager ``mcp.Client`` expects.

    The streams' owner (``_open_transport``) closes them; entering and leaving this is free.
    """

    streams: TransportStreams

    async def __aenter__(self) -> TransportStreams:
        return self.streams

    async def __aexit__(self, *exc_info: object) -> None:
        return None


# --------------------------------------------------------------------------- streamable HTTP


class ResilientTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport that answers network errors with ``503`` instead of raising.

    The MCP SDK lets a raised transport error escape and fail the whole session;
    a ``503`` fails only the request it answers. Its body is a JSON-RPC error with
    code :data:`TRANSPORT_FAILURE`, which the SDK hands to the caller as it is, so
    the caller can tell the network failing a request from the server answering
    one with an error. A refused connection, or ``404``
    for the session the client holds, still marks ``link`` lost: the server is
    gone or has forgotten the session, and only a new connection can help.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport, link: Link) -> None:
        self._inner = inner
        self._link = link

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.TransportError as exc:
            if isinstance(exc, httpx2.ConnectError):
                self._link.lose(f"cannot connect to {request.url}: {type(exc).__name__}")
            error = {"code": TRANSPORT_FAILURE, "message": f"{type(exc).__name__}: {exc}"}
            return httpx2.Response(503, request=request, json={"jsonrpc": "2.0", "id": None, "error": error})
        if response.status_code == 404 and "mcp-session-id" in request.headers:
            self._link.lose("the server no longer knows this session (it restarted or expired it)")
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


# --------------------------------------------------------------------------- stdio


@asynccontextmanager
async def open_stdio_transport(
    params: StdioTransport, link: Link
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
        env={**get_default_environment(), **params.env},
        cwd=params.cwd,
        start_new_session=True,
    )
    link.pid = process.pid
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    stderr_done = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_pump_stdout, process, read_writer, link)
            nursery.start_soon(_pump_stdin, process, write_reader, link)
            nursery.start_soon(_collect_stderr, process, link, stderr_done)
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
    process: trio.Process, sink: MemoryObjectSendStream[SessionMessage | Exception], link: Link
) -> None:
    """Parse the child's stdout, one JSON-RPC message a line, into the session's read stream.

    A line over ``STDOUT_LINE_LIMIT`` loses ``link`` (the stream cannot be trusted past it) and ends the
    read stream, so the session fails its pending requests and supervision restarts the server.
    """
    assert process.stdout is not None
    async with sink:
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            if await _forward_messages(process.stdout, sink):
                link.lose(f"stdout line over {STDOUT_LINE_LIMIT} bytes")
    # Reading on (and discarding) keeps a child that is still writing from blocking on a full pipe.
    with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        while await process.stdout.receive_some():
            pass


async def _forward_messages(
    stdout: trio.abc.ReceiveStream, sink: MemoryObjectSendStream[SessionMessage | Exception]
) -> bool:
    """Send each stdout line's message to ``sink`` until end of file; whether it stopped at a line too long."""
    lines = _LineSplitter(STDOUT_LINE_LIMIT)
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
            link.lose("the server closed its stdin")


async def _collect_stderr(process: trio.Process, link: Link, done: trio.Event) -> None:
    """Keep the last lines of the child's stderr in ``link.stderr_lines``."""
    assert process.stderr is not None
    lines = _LineSplitter(STDERR_LINE_LIMIT)
    try:
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while chunk := await process.stderr.receive_some():
                for line, cut in lines.feed(chunk):
                    text = _stderr_text(line, cut)
                    logger.debug("server pid %s stderr: %s", process.pid, text)
                    link.stderr_lines.append(text)
        if rest := lines.rest():
            link.stderr_lines.append(_stderr_text(rest, lines.cut))
    finally:
        done.set()


def _stderr_text(line: bytes, cut: bool) -> str:
    text = line.decode(errors="replace").rstrip()
    return f"{text} [line cut at {STDERR_LINE_LIMIT} bytes]" if cut else text


async def _watch_exit(process: trio.Process, link: Link, stderr_done: trio.Event) -> None:
    """Report the child's death, with its exit code and its last stderr lines."""
    code = await process.wait()
    with trio.move_on_after(STDERR_FLUSH_WAIT):
        await stderr_done.wait()
    link.lose("the server process exited", exit_code=code)


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
