"""The terminal client: ``yao-actors chat "question"`` — ask over the websocket and print the stream as it arrives;
``yao-actors history THREAD`` — print a stored thread. (``yao-actors chat`` alone is a conversation:
:mod:`yao_actors.cli.chat_repl`.)

:func:`open_service_connection` is the connection (also what tests and the load benchmark use); a
:class:`Conversation` runs messages on one thread and answers what its runs wait for (approvals, a server's forms
and links, asked through :mod:`yao_actors.cli.terminal_questions`); :func:`chat` sends one question and renders the
run with a :class:`~yao_actors.cli.chat_render.Renderer` (readable, or raw JSON lines with ``--json``). The exit code is 0 when the run
finished, 1 on ``RUN_ERROR``, 2 when the service could not be reached or refused us, 3 (:data:`WAITING`) when the
run waits for answers and the input ended before they were given (the questions are printed).
``--thread ID`` continues a thread; the thread of every run is named on stderr, to continue it later.
:func:`show_history` asks for a thread's ``MESSAGES_SNAPSHOT`` and prints its messages and runs.
A reader that stops early (``yao-actors chat ... | head``) ends the command quietly with 0.
The terminal's questions are named here too (``ask_terminal``, ``ask_field``, ``fill_form`` of
:mod:`yao_actors.cli.terminal_questions`), for other commands that ask on the terminal.

URLs may be ``ws://`` or ``wss://`` (TLS, e.g. behind a reverse proxy), or the ``http(s)://`` URL of the page
the service prints at start, which names the same place.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final, TextIO
from urllib.parse import quote, urlsplit, urlunsplit

import attrs
import trio
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    HandshakeError,
    WebSocketConnection,
    wrap_client_stream,
)

from yao_actors.cli.chat_render import Renderer, shorten
from yao_actors.cli.terminal_questions import Ask, LineReader, NoAnswer, decide, waiting_line
from yao_actors.cli.terminal_questions import ask_field as ask_field
from yao_actors.cli.terminal_questions import ask_terminal as ask_terminal
from yao_actors.cli.terminal_questions import fill_form as fill_form
from yao_actors.errors import exception_leaves
from yao_actors.service.auth import BEARER_PREFIX, SUBPROTOCOL

DEFAULT_URL: Final = "ws://127.0.0.1:8765/"
#: Seconds to connect and finish the handshake.
CONNECT_TIMEOUT: Final = 10.0
#: URL schemes accepted, and whether each uses TLS.
_SCHEMES: Final = {"ws": False, "http": False, "wss": True, "https": True}
#: What a closed stdout makes the command return: the reader had what it wanted.
PIPE_CLOSED: Final = 0


#: What a resource keeps as it is when percent-encoded: RFC 3986's reserved characters, and ``%`` of what
#: is encoded already.
_URL_PUNCTUATION: Final = "!#$%&'()*+,/:;=?@[]~"


def websocket_address(url: str) -> tuple[str, int, bool, str]:
    """``(host, port, tls, resource)`` of a ``ws(s)://`` or ``http(s)://`` URL; ``ValueError`` for anything else.

    A path with other than ASCII characters is sent percent-encoded (as a browser sends it).
    """
    parts = urlsplit(url)
    if parts.scheme not in _SCHEMES or not parts.hostname:
        raise ValueError(f"expected a ws://, wss://, http:// or https:// URL with a host, got {url!r}")
    if not parts.netloc.isascii():
        raise ValueError(f"expected a host in ASCII (an international name in its xn-- form), got {parts.netloc!r}")
    tls = _SCHEMES[parts.scheme]
    try:
        port = parts.port or (443 if tls else 80)
    except ValueError:
        raise ValueError(f"bad port in {url!r}") from None
    resource = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.hostname, port, tls, quote(resource, safe=_URL_PUNCTUATION)


def page_url(url: str) -> str:
    """The page of the service whose websocket (or page) is at ``url``: its ``http(s)://`` address."""
    parts = urlsplit(url)
    scheme = "https" if _SCHEMES.get(parts.scheme) else "http"
    return urlunsplit((scheme, parts.netloc, parts.path or "/", parts.query, ""))


@asynccontextmanager
async def open_service_connection(
    url: str = DEFAULT_URL,
    *,
    token: str | None = None,
    browser_style: bool = False,
    ssl_context: ssl.SSLContext | None = None,
) -> AsyncIterator[WebSocketConnection]:
    """Connect to the service at ``url`` (see :func:`websocket_address`), presenting ``token`` if given.

    The token goes in an ``Authorization: Bearer`` header, or with ``browser_style`` as the ``bearer.<token>``
    subprotocol the page uses. ``wss://`` (and ``https://``) connect over TLS, verified with ``ssl_context``
    (default: the system's trust store). The stream is owned here and always closed, also when the service
    closed the websocket first.
    """
    host, port, tls, resource = websocket_address(url)
    headers = [(b"Authorization", f"Bearer {token}".encode())] if token and not browser_style else []
    subprotocols = [SUBPROTOCOL] + ([BEARER_PREFIX + token] if token and browser_style else [])
    stream: trio.abc.Stream
    with trio.fail_after(CONNECT_TIMEOUT):
        if tls:
            context = ssl_context or ssl.create_default_context()
            stream = await trio.open_ssl_over_tcp_stream(host, port, ssl_context=context)
        else:
            stream = await trio.open_tcp_stream(host, port)
    try:
        async with stream, trio.open_nursery() as nursery:
            with trio.fail_after(CONNECT_TIMEOUT):
                ws = await wrap_client_stream(
                    nursery, stream, urlsplit(url).netloc, resource, subprotocols=subprotocols, extra_headers=headers
                )
            try:
                yield ws
            finally:
                with trio.move_on_after(CONNECT_TIMEOUT, shield=True):
                    await ws.aclose()
                nursery.cancel_scope.cancel()
    except* (HandshakeError, trio.TooSlowError) as group:
        raise exception_leaves(group)[0] from None


# --------------------------------------------------------------------------- the command

#: The exit code when the run waits for answers nobody gave (the input ended): the thread keeps its questions.
WAITING: Final = 3


@attrs.define
class Conversation:
    """One thread spoken to over a connection: each :meth:`say` is a run on it, its events printed as they come
    (readably, or raw JSON lines when ``renderer`` is ``None``), and the approvals and questions it ends with
    asked through ``ask`` and answered in a run that follows (see :mod:`yao_actors.cli.terminal_questions`)."""

    ws: WebSocketConnection
    thread_id: str
    out: TextIO
    renderer: Renderer | None
    ask: Ask
    assistant: str | None = None
    lasting: bool = True
    """Whether the thread outlives the command (not with a service of its own, whose threads are in memory)."""
    url: str = DEFAULT_URL
    """Where the service is (to say so)."""

    async def say(self, text: str) -> int | None:
        """Run ``text`` on the thread until it ends: 0 when it finished (its questions answered), 1 on
        ``RUN_ERROR`` or a lost connection, :data:`WAITING` when questions are left without an answer (each is
        printed), ``None`` when ``out`` was closed."""
        code, last = await self._run({"messages": [{"role": "user", "content": text}]})
        while code == 0 and last is not None and (last.get("outcome") or {}).get("type") == "interrupt":
            interrupts = last["outcome"]["interrupts"]
            try:
                entries = [await decide(interrupt, self.ask, self.out) for interrupt in interrupts]
            except NoAnswer:
                self._write("".join(f"{waiting_line(interrupt)}\n" for interrupt in interrupts))
                return WAITING
            code, last = await self._run({"messages": [], "resume": entries})
        return code

    async def request(self, frame: dict[str, Any], *answers: str) -> dict[str, Any]:
        """Send a frame that is answered with one frame (``history``, ``tools``): the answer, or the ``error``
        frame."""
        await self.ws.send_message(json.dumps(frame, ensure_ascii=False))
        while True:
            answer: dict[str, Any] = json.loads(await self.ws.get_message())
            if answer.get("type") in (*answers, "error"):
                return answer

    async def _run(self, fields: dict[str, Any]) -> tuple[int | None, dict[str, Any] | None]:
        run_id = uuid.uuid4().hex
        frame: dict[str, Any] = {"type": "run", "runId": run_id, "threadId": self.thread_id, **fields}
        if self.assistant:
            frame["assistant"] = self.assistant
        await self.ws.send_message(json.dumps(frame, ensure_ascii=False))
        code, last = await _follow(self.ws, run_id, self.renderer, self.out)
        if last is not None:
            self.thread_id = last.get("threadId") or self.thread_id
        return code, last

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()


Hold = Callable[[Conversation, LineReader], Awaitable[int | None]]
"""A conversation held instead of one question, its lines read from the reader: its exit code (``None``: the
output was closed). :func:`yao_actors.cli.chat_repl.hold_conversation` is the command's."""


async def chat(
    question: str | Hold,
    *,
    url: str = DEFAULT_URL,
    token: str | None = None,
    assistant: str | None = None,
    thread_id: str | None = None,
    raw: bool = False,
    out: TextIO = sys.stdout,
    ask: Ask | None = None,
    reader: LineReader | None = None,
    lasting: bool = True,
) -> int:
    """Ask ``question`` (on thread ``thread_id``, else a new one) and print the run as it streams; returns the
    exit code (see the module docstring). Instead of a question, a :data:`Hold` holds a conversation on the
    thread, its lines read from ``reader`` (default: standard input; :mod:`yao_actors.cli.chat_repl`). ``lasting``:
    the thread outlives the command, which says how to continue it.

    A run that ends waiting for approvals or a server's questions (``RUN_FINISHED`` outcome ``interrupt``) is
    answered: ``ask`` gets each question and returns the reply (by default the next line of ``reader``: the
    terminal's, or of standard input when it is not a terminal), a form is asked field by field, a URL printed
    to open; a run carrying the answers as ``resume`` entries follows on the same connection. When the input
    ends first, the questions are printed and the code is :data:`WAITING`.
    """
    lines = reader or LineReader.standard()

    async def converse(ws: WebSocketConnection) -> int:
        renderer = None if raw else Renderer(out=out, live=out.isatty(), page=page_url(url))
        thread = thread_id or uuid.uuid4().hex
        conversation = Conversation(ws, thread, out, renderer, ask or lines.ask, assistant, lasting, url)
        code = await conversation.say(question) if isinstance(question, str) else await question(conversation, lines)
        return finish(conversation, code, out)

    return await with_connection(url, token, converse)


async def with_connection(url: str, token: str | None, body: Callable[[WebSocketConnection], Awaitable[int]]) -> int:
    """``body``'s exit code over a connection to the service; 2 when it could not be had (said on standard
    error)."""
    try:
        websocket_address(url)
    except ValueError as error:
        _complain(str(error))
        return 2
    try:
        async with open_service_connection(url, token=token) as ws:
            return await body(ws)
    except ConnectionRejected as rejected:
        body_text = (rejected.body or b"").decode(errors="replace").strip()
        _complain(f"{url} refused the connection: HTTP {rejected.status_code} {body_text}")
    except (OSError, HandshakeError, trio.TooSlowError) as error:
        _complain(f"cannot reach {url}: {error or type(error).__name__}")
    except ConnectionClosed as closed:
        _complain(f"the connection closed ({closed.reason})")
        return 1
    return 2


def finish(conversation: Conversation, code: int | None, out: TextIO) -> int:
    """The exit code of a conversation that ended with ``code``, its thread named on standard error to continue it
    (a closed ``out``: :data:`PIPE_CLOSED`)."""
    if code is None:
        _silence(out)
        return PIPE_CLOSED
    thread = conversation.thread_id
    if code == WAITING:
        _complain(f"the run waits for answers nobody gave (the input ended); thread {thread}")
    elif conversation.lasting:
        print(f"yao-actors chat: thread {thread} (continue it with --thread {thread})", file=sys.stderr)
    return code


async def _follow(
    ws: WebSocketConnection, run_id: str, renderer: Renderer | None, out: TextIO
) -> tuple[int | None, dict[str, Any] | None]:
    """Print events until the run's terminal one: 0 if it finished, 1 on ``RUN_ERROR`` or a lost connection.

    Returns the code and the terminal event. A closed ``out`` (the reader of a pipe left) ends following at
    once with ``None``.
    """
    try:
        while True:
            event = json.loads(await ws.get_message())
            if renderer is None:
                out.write(json.dumps(event, ensure_ascii=False) + "\n")
                out.flush()
            else:
                renderer.render(event)
            if event.get("runId") == run_id and event.get("type") in ("RUN_FINISHED", "RUN_ERROR"):
                return (0 if event["type"] == "RUN_FINISHED" else 1), event
    except ConnectionClosed as closed:
        _complain(f"the connection closed before the run ended ({closed.reason})")
        return 1, None
    except BrokenPipeError:
        return None, None


async def show_history(
    thread_id: str, *, url: str = DEFAULT_URL, token: str | None = None, raw: bool = False, out: TextIO = sys.stdout
) -> int:
    """Print a stored thread: each message (tool calls and results included), then its runs; 0, or 2 when the
    service could not be reached, 1 when it could not read its store. An unknown thread prints nothing."""

    async def ask_for_it(ws: WebSocketConnection) -> int:
        await ws.send_message(json.dumps({"type": "history", "threadId": thread_id}))
        try:
            snapshot = json.loads(await ws.get_message())
        except ConnectionClosed as closed:
            _complain(f"cannot reach {url}: {closed}")
            return 2
        return print_history(snapshot, raw, out)

    return await with_connection(url, token, ask_for_it)


def print_history(snapshot: dict[str, Any], raw: bool, out: TextIO) -> int:
    """Print a ``MESSAGES_SNAPSHOT`` (raw: as it came); 1 when it is an ``error`` frame instead (said on stderr)."""
    if snapshot.get("type") != "MESSAGES_SNAPSHOT":
        _complain(f"{snapshot.get('code', 'error')}: {snapshot.get('message', snapshot)}")
        return 1
    try:
        if raw:
            out.write(json.dumps(snapshot, ensure_ascii=False) + "\n")
        else:
            out.write("".join(f"{line}\n" for line in history_lines(snapshot)))
        out.flush()
    except BrokenPipeError:
        _silence(out)
    return 0


def history_lines(snapshot: dict[str, Any]) -> list[str]:
    """A ``MESSAGES_SNAPSHOT`` (with ``runs``) as readable lines."""
    lines: list[str] = []
    for message in snapshot.get("messages", []):
        role = message.get("role")
        if role == "tool":
            lines.append(f"  → {shorten(str(message.get('content', '')))}")
            continue
        for call in message.get("toolCalls", []):
            function = call.get("function", {})
            lines.append(f"  ⚙ {function.get('name')} {function.get('arguments') or '{}'}")
        if message.get("content"):
            lines.append(f"{role}: {message['content']}")
    for run in snapshot.get("runs", []):
        usage = run.get("usage") or {}
        tokens = f" · tokens: {usage['total_tokens']}" if "total_tokens" in usage else ""
        lines.append(
            f"— run {run['runId']} ({run.get('assistant')}): {run.get('outcome') or 'running'}"
            f" · {run.get('startedAt')} → {run.get('finishedAt') or '…'}{tokens}"
        )
    return lines


def _silence(out: TextIO) -> None:
    """Point a closed ``out`` at /dev/null, so flushing it at exit does not print a ``BrokenPipeError``."""
    try:
        fd = out.fileno()
    except (OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _complain(message: str) -> None:
    print(f"yao-actors chat: {message}", file=sys.stderr)
