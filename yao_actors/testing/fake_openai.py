"""A fake OpenAI-compatible endpoint: a real HTTP/1.1 server on 127.0.0.1 for tests.

``open_fake_openai(script)`` serves ``POST /v1/chat/completions`` on a free
loopback port and answers each request with the next scripted :class:`Reply`
(or what a function of the request returns). It speaks the exact Chat
Completions wire format: streamed requests get ``text/event-stream`` with one
``data: {...}\\n\\n`` line per ``chat.completion.chunk`` (a first chunk with the
role, reasoning and text fragments, tool calls split across chunks and
optionally interleaved, a finish chunk, a usage chunk with empty ``choices``
when ``stream_options.include_usage`` asked for it) and ``data: [DONE]``;
other requests get one ``chat.completion`` object. It records every request
(``.requests``) and can misbehave on purpose: an error status with an
OpenAI-shaped error body and an optional ``Retry-After``, a stall mid-stream, a
stream that ends before ``[DONE]``, a dropped connection, a wrong content type,
malformed tool arguments (any raw text in :class:`FakeToolCall`).

Everything runs in the caller's Trio run; the server lives as long as the
``async with`` block, and leaving it closes every connection, stalled ones
included.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import h11
import trio

from yao_actors.models.base import Usage

_CREATED = 1_700_000_000
_MAX_BODY = 16 << 20
DEFAULT_USAGE = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)
"""The usage a :class:`Reply` reports unless told otherwise."""


@attrs.frozen
class FakeToolCall:
    """A tool call to play; ``arguments`` is sent verbatim, malformed JSON included."""

    name: str
    arguments: str = "{}"
    id: str | None = None


@attrs.frozen
class Reply:
    """One scripted answer, or a fault.

    The answer: ``text``, ``reasoning`` (sent as ``reasoning_content``),
    ``tool_calls``, ``usage``; ``finish_reason`` defaults to ``"tool_calls"``
    or ``"stop"``. Text, reasoning and arguments are cut into fragments of
    ``chunk_size`` characters; ``interleave`` sends the fragments of several
    tool calls in turn (call 0, call 1, call 0, ...) instead of one call after
    the other. ``chunk_delay`` seconds pass before each chunk, to play a
    model's pace.

    Faults: ``status`` >= 400 answers with an error body carrying
    ``error_message`` (and ``Retry-After: retry_after`` when set);
    ``content_type`` replaces ``text/event-stream`` / ``application/json``
    (the body is then a small HTML page); after ``stall_after`` chunks the
    stream stalls until the server closes; after ``cut_after`` chunks the body
    ends properly but without the finish chunk, usage and ``[DONE]``; after
    ``drop_after`` chunks the connection is closed mid-body.
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[FakeToolCall, ...] = ()
    usage: Usage | None = DEFAULT_USAGE
    finish_reason: str | None = None
    chunk_size: int = 4
    interleave: bool = False
    chunk_delay: float = 0.0
    status: int = 200
    error_message: str = ""
    retry_after: str | None = None
    content_type: str | None = None
    stall_after: int | None = None
    cut_after: int | None = None
    drop_after: int | None = None

    @classmethod
    def http_error(cls, status: int, message: str = "", *, retry_after: str | None = None) -> Reply:
        """An error status with an OpenAI-shaped body."""
        return cls(status=status, error_message=message or f"fake error {status}", retry_after=retry_after)


@attrs.frozen
class RecordedRequest:
    """A request the fake received: method, path, headers (lower-case names) and the JSON body."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


Script = Sequence[Reply] | Callable[[RecordedRequest], Reply]


@attrs.define(eq=False)
class FakeOpenAI:
    """The running fake: where it listens, what it received, what it will play."""

    script: Script
    base_url: str = ""
    requests: list[RecordedRequest] = attrs.field(factory=list)

    def _next_reply(self, request: RecordedRequest) -> Reply:
        if callable(self.script):
            return self.script(request)
        played = len(self.requests) - 1
        if played >= len(self.script):
            return Reply.http_error(400, f"fake OpenAI: script exhausted after {len(self.script)} replies")
        return self.script[played]

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_BODY)
        try:
            while True:
                request = await _receive_request(stream, connection)
                if request is None:
                    return
                self.requests.append(request)
                reply = self._next_reply(request)
                if not await _respond(stream, connection, request, reply, len(self.requests)):
                    return
                if connection.our_state is not h11.DONE or connection.their_state is not h11.DONE:
                    return
                connection.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            return
        finally:
            await stream.aclose()


@asynccontextmanager
async def open_fake_openai(script: Script = ()) -> AsyncIterator[FakeOpenAI]:
    """Serve ``script`` on ``http://127.0.0.1:<free port>/v1`` for the duration of the block."""
    fake = FakeOpenAI(script)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, fake._serve_connection, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        fake.base_url = f"http://127.0.0.1:{port}/v1"
        yield fake
        nursery.cancel_scope.cancel()


async def _receive_request(stream: trio.SocketStream, connection: h11.Connection) -> RecordedRequest | None:
    head: h11.Request | None = None
    body = bytearray()
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(await stream.receive_some(65536))
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage) and head is not None:
            headers = {name.decode().lower(): value.decode() for name, value in head.headers}
            try:
                parsed = json.loads(body) if body else None
            except ValueError:
                parsed = body.decode("utf-8", errors="replace")
            return RecordedRequest(head.method.decode(), head.target.decode(), headers, parsed)
        else:
            return None


async def _send(stream: trio.SocketStream, connection: h11.Connection, event: h11.Event) -> None:
    data = connection.send(event)
    if data:
        await stream.send_all(data)


async def _send_whole(
    stream: trio.SocketStream,
    connection: h11.Connection,
    status: int,
    content_type: str,
    body: bytes,
    extra_headers: Sequence[tuple[str, str]] = (),
) -> None:
    headers = [("content-type", content_type), ("content-length", str(len(body))), *extra_headers]
    await _send(stream, connection, h11.Response(status_code=status, headers=headers))
    await _send(stream, connection, h11.Data(data=body))
    await _send(stream, connection, h11.EndOfMessage())


async def _respond(
    stream: trio.SocketStream, connection: h11.Connection, request: RecordedRequest, reply: Reply, number: int
) -> bool:
    """Answer one request; ``False`` when the connection was dropped on purpose."""
    if (request.method, request.path) != ("POST", "/v1/chat/completions"):
        reply = Reply.http_error(404, f"fake OpenAI: no route for {request.method} {request.path}")
    body = request.body if isinstance(request.body, dict) else {}
    if reply.status >= 400:
        error = {"error": {"message": reply.error_message, "type": "fake_error", "param": None, "code": None}}
        retry = [("retry-after", reply.retry_after)] if reply.retry_after is not None else []
        await _send_whole(stream, connection, reply.status, "application/json", _json(error), retry)
        return True
    if reply.content_type is not None:
        page = b"<html><body><h1>Welcome</h1>This is not an API.</body></html>"
        await _send_whole(stream, connection, reply.status, reply.content_type, page)
        return True
    model = str(body.get("model") or "fake-model")
    if not body.get("stream"):
        await _send_whole(stream, connection, 200, "application/json", _json(_whole(reply, model, number)))
        return True
    return await _stream(stream, connection, reply, _chunks(reply, model, number, _wants_usage(body)))


async def _stream(
    stream: trio.SocketStream, connection: h11.Connection, reply: Reply, chunks: list[dict[str, Any]]
) -> bool:
    await _send(stream, connection, h11.Response(status_code=200, headers=[("content-type", "text/event-stream")]))
    for sent, chunk in enumerate(chunks):
        if sent == reply.stall_after:
            await trio.sleep_forever()
        if sent == reply.cut_after:
            await _send(stream, connection, h11.EndOfMessage())
            return True
        if sent == reply.drop_after:
            return False
        await trio.sleep(reply.chunk_delay)
        await _send(stream, connection, h11.Data(data=b"data: " + _json(chunk) + b"\n\n"))
    await _send(stream, connection, h11.Data(data=b"data: [DONE]\n\n"))
    await _send(stream, connection, h11.EndOfMessage())
    return True


def _json(value: Any) -> bytes:
    """UTF-8 JSON; a value with lone surrogates goes as ``\\uD800`` escapes, the valid JSON a hostile endpoint may send."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":")).encode()


def _wants_usage(body: Mapping[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))]


def _call_id(reply: Reply, number: int, index: int) -> str:
    return reply.tool_calls[index].id or f"call_fake_{number}_{index}"


def _finish_reason(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _usage(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


def _tool_call_fragments(reply: Reply, number: int) -> list[dict[str, Any]]:
    """Tool-call deltas: a head with id and name per call, then argument fragments."""
    per_call = []
    for index, call in enumerate(reply.tool_calls):
        head = {"index": index, "id": _call_id(reply, number, index), "type": "function"}
        fragments: list[dict[str, Any]] = [{**head, "function": {"name": call.name, "arguments": ""}}]
        fragments += [
            {"index": index, "function": {"arguments": piece}} for piece in _pieces(call.arguments, reply.chunk_size)
        ]
        per_call.append(fragments)
    if not reply.interleave:
        return [fragment for fragments in per_call for fragment in fragments]
    rounds = max((len(fragments) for fragments in per_call), default=0)
    return [fragments[r] for r in range(rounds) for fragments in per_call if r < len(fragments)]


def _chunks(reply: Reply, model: str, number: int, with_usage: bool) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a streamed reply, in order."""

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**_envelope(model, number, "chat.completion.chunk"), "choices": [choice]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"reasoning_content": piece}) for piece in _pieces(reply.reasoning, reply.chunk_size)]
    chunks += [chunk({"content": piece}) for piece in _pieces(reply.text, reply.chunk_size)]
    chunks += [chunk({"tool_calls": [fragment]}) for fragment in _tool_call_fragments(reply, number)]
    chunks.append(chunk({}, _finish_reason(reply)))
    if with_usage and reply.usage is not None:
        chunks.append(
            {**_envelope(model, number, "chat.completion.chunk"), "choices": [], "usage": _usage(reply.usage)}
        )
    return chunks


def _whole(reply: Reply, model: str, number: int) -> dict[str, Any]:
    """The ``chat.completion`` object of a non-streamed reply."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": _call_id(reply, number, i),
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for i, c in enumerate(reply.tool_calls)
        ]
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(reply)}
    answer = {**_envelope(model, number, "chat.completion"), "choices": [choice]}
    if reply.usage is not None:
        answer["usage"] = _usage(reply.usage)
    return answer


def _envelope(model: str, number: int, kind: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-fake-{number}",
        "object": kind,
        "created": _CREATED,
        "model": model,
        "system_fingerprint": "fp_fake",
    }
