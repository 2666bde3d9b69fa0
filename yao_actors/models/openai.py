"""The client of any OpenAI-compatible Chat Completions endpoint, on ``httpx2``.

OpenAI, vLLM, Ollama, llama.cpp server, LiteLLM, DeepSeek and Qwen all speak
this dialect. A call streams (``stream: true`` with
``stream_options.include_usage``) and reports every fragment to ``on_delta`` as
it arrives: text, ``reasoning_content`` (or ``reasoning``), and tool-call
fragments, which are assembled by their ``index`` (several calls may be
interleaved; ids and names arrive once, arguments in pieces).

The request body is ``model``, ``messages``, ``tools`` (when there are any),
the streaming fields, and then ``ModelSpec.params`` merged over them; a
``None`` param removes a field (``{"stream_options": None}`` for an endpoint
that refuses it). ``tools`` in ``params`` are static tools offered *before* the
given (MCP) tools, as the seed appended its MCP tools to ``options.tools``.
An assistant's ``options`` reach the request through :meth:`OpenAIModel.with_params`.

Deadlines are Trio cancel scopes owned by this client, never ``timeout=`` arguments of the HTTP stack:

- the **connect deadline** (``ModelSpec.connect_timeout``) bounds opening the
  connection, sending the request and receiving the response headers of a
  streamed call (OpenAI-compatible servers send them before generating);
- the **read deadline** (``ModelSpec.read_timeout``) bounds every wait for the
  next chunk of the body, so a stream that stalls midway fails even if it
  started well; for ``stream: false`` it bounds the whole answer.

Either firing raises :class:`~yao_actors.errors.ModelTimeout` saying that the
endpoint (its URL) did not respond or stopped responding, within which setting;
timeouts are not retried (the caller's own deadline is the budget for patience).

Retries: connection errors, 429 and 5xx are retried with exponential backoff and jitter, honouring
``Retry-After``, at most ``max_retries`` times and never past ``retry_budget`` seconds since the first
attempt — and only while no delta was delivered, so a half-relayed stream is never replayed (each retry is
logged, and is an event on the call's span). Other failures raise at once: a 4xx raises
:class:`~yao_actors.errors.ModelHTTPError` carrying the endpoint's own message; a content type other than
``text/event-stream`` or ``application/json`` (accepted even for a streamed request, from endpoints that ignore
``stream``), a malformed chunk (not JSON, nested deeper than :data:`~yao_actors.untrusted.json.MAX_DEPTH`, or a
field of the wrong type), an error object in the stream, or a stream that ends before ``[DONE]`` or a finish
reason raise :class:`~yao_actors.errors.ModelStreamError`.

The request body is serialised by :func:`~yao_actors.untrusted.json.dumps_utf8`
(lone surrogates in the history go as U+FFFD), and strings read from the
stream have theirs replaced the same way.

Each call opens its own connection pool (sharing one TLS context) unless the
model is given an ``httpx2.AsyncClient`` to share (its owner closes it).
"""

from __future__ import annotations

import email.utils
import functools
import json
import logging
import os
import random
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager, contextmanager
from datetime import UTC, datetime
from typing import Any

import attrs
import httpx2
import trio
from opentelemetry import trace

from yao_actors.errors import ModelError, ModelHTTPError, ModelStreamError, ModelTimeout
from yao_actors.models.base import Completion, Delta, Message, OnDelta, ToolSchema
from yao_actors.models.chat_chunks import ChunkAssembly, expect, member
from yao_actors.models.sse import ServerSentEvent, SSEDecoder
from yao_actors.specs import ModelSpec
from yao_actors.transports.http_bodies import unwind
from yao_actors.untrusted import json as untrusted_json

logger = logging.getLogger(__name__)

BACKOFF_INITIAL = 0.5
"""Seconds before the first retry; doubled for every further one (before jitter)."""
BACKOFF_MAX = 20.0
"""Cap of one backoff delay, in seconds (a longer ``Retry-After`` still wins)."""
_SNIPPET = 300


class _Retryable(Exception):
    """An attempt failed in a way worth retrying; ``error`` is what to raise if no retry is left."""

    def __init__(self, error: ModelError, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


@attrs.define
class _Relay:
    """Passes deltas on to the caller and remembers whether any went out."""

    on_delta: OnDelta | None
    delivered: bool = False

    async def send(self, delta: Delta) -> None:
        self.delivered = True
        if self.on_delta is not None:
            await self.on_delta(delta)


@attrs.define(eq=False)
class OpenAIModel:
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    ``spec`` says where and how (see :class:`~yao_actors.config.ModelSpec`);
    the API key is read from the environment variable ``spec.api_key_env``
    when the model is built unless ``api_key`` is given (no key, no
    ``Authorization`` header: fine for a local Ollama). ``http_client`` shares a
    caller-owned client and its connection pool between calls (give it
    ``timeout=None``: the deadlines here are the model's own).
    """

    spec: ModelSpec
    http_client: httpx2.AsyncClient | None = None
    api_key: str | None = None
    name: str = attrs.field(init=False)
    _url: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        if self.api_key is None and self.spec.api_key_env:
            self.api_key = os.environ.get(self.spec.api_key_env)
        self.name = self.spec.model or self.spec.id
        self._url = self.spec.base_url.rstrip("/") + "/chat/completions"

    @property
    def max_images(self) -> int:
        """Images of a turn's tool results this model is sent: ``max_images`` when marked ``vision``, else none."""
        return self.spec.max_images if self.spec.vision else 0

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema],
        *,
        on_delta: OnDelta | None = None,
    ) -> Completion:
        """Run one completion, relaying its deltas; see the module docstring for failures."""
        body = self._body(messages, tools)
        relay = _Relay(on_delta)
        started = trio.current_time()
        async with self._client() as client:
            attempt = 0
            while True:
                try:
                    return await self._attempt(client, body, relay)
                except _Retryable as failure:
                    delay = _backoff(attempt, failure.retry_after)
                    out_of_budget = trio.current_time() - started + delay > self.spec.retry_budget
                    if attempt >= self.spec.max_retries or out_of_budget:
                        raise failure.error from failure.__cause__
                    _report_retry(self.name, attempt + 1, delay, failure.error)
                attempt += 1
                await trio.sleep(delay)

    def _body(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> dict[str, Any]:
        """The request body; ``params`` override defaults, and a ``None`` param removes a field."""
        params = dict(self.spec.params)
        static_tools = params.pop("tools", ())
        body: dict[str, Any] = {"model": self.spec.model, "messages": list(messages)}
        if static_tools is None:
            body["tools"] = None
        elif static_tools or tools:
            body["tools"] = [*static_tools, *tools]
        if self.spec.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        body.update(params)
        return {key: value for key, value in body.items() if value is not None}

    def with_params(self, params: Mapping[str, Any]) -> OpenAIModel:
        """This model with ``params`` merged over its configured ``params`` (an assistant's ``options``)."""
        return attrs.evolve(self, spec=attrs.evolve(self.spec, params={**self.spec.params, **params}))

    def _headers(self) -> dict[str, str]:
        headers = {
            "Accept": "text/event-stream" if self.spec.stream else "application/json",
            "Content-Type": "application/json",
        }
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        headers.update(self.spec.headers)
        return headers

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[httpx2.AsyncClient]:
        if self.http_client is not None:
            yield self.http_client
            return
        async with httpx2.AsyncClient(timeout=None, verify=_ssl_context()) as client:
            yield client

    async def _attempt(self, client: httpx2.AsyncClient, body: dict[str, Any], relay: _Relay) -> Completion:
        # Encoded here, not by httpx2: a lone surrogate that reached the history must not fail every later call.
        content = untrusted_json.dumps_utf8(body)
        request = client.build_request("POST", self._url, content=content, headers=self._headers())
        headers_deadline = "connect_timeout" if self.spec.stream else "read_timeout"
        response: httpx2.Response | None = None
        try:
            with self._deadline(headers_deadline, "did not respond: no response headers"):
                response = await client.send(request, stream=True)
            await self._refuse_error_status(response)
            content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
            if content_type == "text/event-stream":
                return await self._read_stream(response, relay)
            if content_type == "application/json":  # also what endpoints that ignore ``stream`` send
                return await self._read_whole(response, relay)
            snippet = (await self._read_body(response))[:_SNIPPET]
            raise ModelStreamError(
                f"expected text/event-stream or application/json from {self._url}, got "
                f"{content_type or 'no content type'!r} (is base_url an OpenAI-compatible endpoint?): {snippet!r}"
            )
        except httpx2.RequestError as exc:
            message = f"the connection to the model endpoint {self._url} failed: {exc!r}"
            if relay.delivered:
                raise ModelStreamError(message) from exc
            raise _Retryable(ModelError(message)) from exc
        finally:
            if response is not None:
                await response.aclose()

    @contextmanager
    def _deadline(self, setting: str, what: str) -> Iterator[None]:
        """A deadline of ``setting`` (``connect_timeout`` or ``read_timeout``); ``what`` says what did not come."""
        seconds: float = getattr(self.spec, setting)
        try:
            with trio.fail_after(seconds):
                yield
        except trio.TooSlowError:
            raise ModelTimeout(
                f"the model endpoint {self._url} {what} within {seconds:g} s (models.{self.spec.id}.{setting})"
            ) from None

    async def _read_body(self, response: httpx2.Response) -> str:
        with self._deadline("read_timeout", "stopped responding: the body did not end"):
            return (await response.aread()).decode("utf-8", errors="replace")

    async def _refuse_error_status(self, response: httpx2.Response) -> None:
        if response.status_code < 300:
            return
        try:
            text = await self._read_body(response)
        except httpx2.TransportError as exc:
            text = f"(error body unreadable: {exc!r})"
        error = ModelHTTPError(response.status_code, _error_message(text), url=self._url)
        if response.status_code == 429 or response.status_code >= 500:
            raise _Retryable(error, _retry_after(response.headers.get("retry-after")))
        raise error

    async def _read_stream(self, response: httpx2.Response, relay: _Relay) -> Completion:
        assembly = ChunkAssembly()
        try:
            async with aclosing(self._events(response)) as events:
                async for event in events:
                    if assembly.done:
                        continue  # read on to the end of the body, so the HTTP stack finishes cleanly
                    if event.data == "[DONE]":
                        assembly.done = True
                        continue
                    for delta in assembly.apply(_parse_chunk(event.data)):
                        await relay.send(delta)
        except ModelTimeout:
            if not assembly.done:
                raise
        if not (assembly.done or assembly.finish_reason):
            raise ModelStreamError(f"the stream from {self._url} ended before [DONE] or a finish reason")
        return assembly.completion()

    async def _events(self, response: httpx2.Response) -> AsyncGenerator[ServerSentEvent, None]:
        """The body's events, each wait for a chunk under the read deadline."""
        decoder = SSEDecoder()
        async with _unwinding(response.aiter_bytes()) as chunks:
            while True:
                with self._deadline("read_timeout", "stopped responding: no data"):
                    chunk = await anext(chunks, None)
                if chunk is None:
                    break
                for event in decoder.feed(chunk):
                    yield event
        for event in decoder.flush():
            yield event

    async def _read_whole(self, response: httpx2.Response, relay: _Relay) -> Completion:
        data = _parse_chunk(await self._read_body(response))
        try:
            choice = data["choices"][0]
            message = dict(expect(choice["message"], dict, "choices[0].message"))
        except (KeyError, IndexError, TypeError) as exc:
            raise ModelStreamError(f"no choices[0].message in the answer of {self._url}") from exc
        calls = member(message, "tool_calls", list, "choices[0].message.tool_calls") or ()
        message["tool_calls"] = [
            {"index": i, **expect(call, dict, "a tool_calls entry")} for i, call in enumerate(calls)
        ]
        assembly = ChunkAssembly()
        chunk = {"choices": [{"delta": message, "finish_reason": choice.get("finish_reason")}]}
        for delta in assembly.apply({**chunk, "usage": data.get("usage")}):
            await relay.send(delta)
        return assembly.completion()


@asynccontextmanager
async def _unwinding(chunks: AsyncGenerator[bytes, None]) -> AsyncIterator[AsyncGenerator[bytes, None]]:
    """``response.aiter_bytes()``, unwound from the inside when left before its end.

    Closing it at a ``yield`` (a consumer that raised or was cancelled
    midway) would leave httpcore2's innermost generator suspended, for the
    garbage collector to finalise later with a ``ResourceWarning``
    (:mod:`yao_actors.transports.http_bodies`, which applies here too: the
    client may be the caller's, with any transport).
    """
    try:
        yield chunks
    finally:
        await unwind(chunks)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every call: building one loads the CA bundle, which takes tens of milliseconds."""
    return httpx2.create_ssl_context()


def _parse_chunk(data: str) -> dict[str, Any]:
    """One JSON object of the stream (or the whole answer); an ``error`` object raises."""
    try:
        chunk = untrusted_json.loads_object(data)
    except ValueError as exc:
        raise ModelStreamError(f"malformed JSON from the model endpoint ({exc}): {data[:_SNIPPET]!r}") from None
    if chunk.get("error"):
        raise ModelStreamError(f"the model endpoint reported an error: {_error_message(json.dumps(chunk))}")
    return chunk


def _error_message(text: str) -> str:
    """The endpoint's own message from an error body (OpenAI, FastAPI and plain-text shapes)."""
    try:
        data = untrusted_json.loads(text)
    except ValueError:
        return text.strip()[:_SNIPPET] or "(empty body)"
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            error = error.get("message") or error.get("detail") or error
        if isinstance(error, str):
            return error
        return json.dumps(error, ensure_ascii=False)[:_SNIPPET]
    return text.strip()[:_SNIPPET]


def _retry_after(value: str | None) -> float | None:
    """Seconds asked for by a ``Retry-After`` header (seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _backoff(attempt: int, retry_after: float | None) -> float:
    """Exponential backoff with jitter (half to all of the step), or longer if the endpoint asked."""
    step = min(BACKOFF_MAX, BACKOFF_INITIAL * 2.0**attempt)
    return max(step * random.uniform(0.5, 1.0), retry_after or 0.0)


def _report_retry(model: str, retry: int, delay: float, error: Exception) -> None:
    """Retry number ``retry`` of a call to ``model`` comes in ``delay`` seconds, after ``error``: a log record, and
    an event on the current span (the run's ``chat`` span; OpenTelemetry's API directly, as models sit below the
    runtime's observability)."""
    logger.warning("model %s: %s; retry %d in %.2fs", model, error, retry, delay, extra={"model": model})
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event(
            "yao.model.retry",
            {"yao.retry.number": retry, "yao.retry.delay": delay, "error.type": type(error).__name__},
        )
