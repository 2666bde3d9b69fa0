"""``POST /agui`` and ``POST /agui/{assistant}``: AG-UI's own HTTP transport, on the service's port.

The body is an AG-UI ``RunAgentInput`` (:mod:`yao_actors.service.agui_input`); the answer is
``text/event-stream`` with one AG-UI event per ``data:`` line, encoded by ``ag_ui``'s ``EventEncoder`` — the
same events, ``runId`` and ``seq`` included, that the websocket sends. This is what the official
``@ag-ui/client`` ``HttpAgent`` (and CopilotKit through it) speaks.

The rules are the websocket's: the ``Origin`` check, the bearer token (``Authorization: Bearer``; its principal
owns the threads it creates), the body bounded by ``server.max_frame_bytes``, runs bounded by
``server.max_runs`` and ``server.max_runs_per_principal``, no new run while shutting down. A request refused
before its run starts gets a JSON error ``{"error": {"code", "message"}}`` with its status (400 unreadable body,
401, 403, 404 unknown assistant or thread, 409 the run id taken, 413, 422 not a valid run, 429 the principal's
share of runs taken, 500 a bug, 503 at the service's limit, shutting down or the store unavailable), never a
stream. A ``runId`` is taken when a stored run has it, whoever's: the store is asked before the answer starts.
Once the stream has started, failures are ``RUN_ERROR`` events and the stream always ends with exactly one
terminal event.

The client closing the connection cancels the run, as a websocket disconnect does; so does a client that takes
nothing of the stream for ``server.idle_timeout`` seconds (it is dropped). A client that only half-closes
(``shutdown(SHUT_WR)`` once its request is sent) still gets the whole stream: the end of its input reads the
same as a close, so from then on the service probes it — an SSE comment (``:``, which clients ignore) every
:data:`PROBE_INTERVAL` seconds — and a client that has closed answers the first with a reset, which the next
write finds: its run is cancelled within about that interval. The run's slot in ``server.max_runs`` is given
back when the run ends, even while its last events still wait for a slow client. Service shutdown
(:meth:`AguiExchange.stop`) cancels the run gracefully (it still sends its terminal event).

Browsers get CORS answers for origins the Origin check accepts: a preflight ``OPTIONS`` is answered 204, and
every answer to an accepted origin carries ``Access-Control-Allow-Origin``.
"""

from __future__ import annotations

import contextlib
import logging
import urllib.parse
from collections.abc import Sequence
from typing import Final

import attrs
import trio
from ag_ui.encoder import EventEncoder

from yao_actors.config import ServiceSpec
from yao_actors.conversation.request import RunRequest
from yao_actors.errors import ErrorFrameCode, RunError, RunErrorCode
from yao_actors.events import EventDict, parse_event
from yao_actors.service.agui_input import AguiRun, InputError, parse_run_input
from yao_actors.service.app_proxy import proxied_answer, proxy_events
from yao_actors.service.auth import Credential, Handshake
from yao_actors.service.budget import RunBudget, RunSlot, TooManyRuns
from yao_actors.service.http import Exchange
from yao_actors.service.protocol import USER_ROLES
from yao_actors.service.relay import EventStream, Refusal, RunRelay, admit_client, admit_run
from yao_actors.service.served import RunOpener

logger = logging.getLogger(__name__)

#: The path of the endpoint (``/agui/{assistant}`` names the assistant).
AGUI_PATH: Final = "/agui"

_ENCODER: Final = EventEncoder()

#: Seconds between the probes of a client whose input ended (see the module docstring).
PROBE_INTERVAL: Final = 0.5
#: The probe: an SSE comment, which every SSE client skips.
PROBE: Final = b":\n\n"

#: The HTTP status of a ``RunError`` raised before a run starts.
_STATUS: Final = {
    RunErrorCode.BAD_REQUEST: 400,
    RunErrorCode.UNKNOWN_ASSISTANT: 404,
    RunErrorCode.UNKNOWN_THREAD: 404,
    RunErrorCode.TOO_MANY_RUNS: 503,
    RunErrorCode.SHUTTING_DOWN: 503,
    RunErrorCode.STORE_UNAVAILABLE: 503,
}


def encode_sse(event: EventDict) -> bytes:
    """One event as a Server-Sent Events message: ``id:`` its ``seq``, then the ``data:`` line of ``ag_ui``'s encoder.

    The event is checked against its ``ag_ui`` model; the websocket envelope's fields that the model does not
    have (``seq``, and ``runId`` outside ``RUN_STARTED`` / ``RUN_FINISHED``) are left out of the data — one
    response carries one run, and AG-UI clients strip (and warn about) fields they do not know — and ``seq``
    becomes the SSE event id.
    """
    model = parse_event(event)
    extras = model.model_extra or {}
    if extras:
        model = type(model).model_validate({key: value for key, value in event.items() if key not in extras})
    data = _ENCODER.encode(model)
    seq = event.get("seq")
    return (data if seq is None else f"id: {seq}\n{data}").encode()


@attrs.define(eq=False)
class AguiExchange:
    """One ``POST /agui`` (or its CORS preflight): the checks, the run, and its event stream."""

    exchange: Exchange
    runtime: RunOpener
    spec: ServiceSpec
    credentials: Sequence[Credential]
    budget: RunBudget
    _stream: EventStream | None = attrs.field(default=None, init=False)
    _stopping: bool = attrs.field(default=False, init=False)

    def stop(self) -> None:
        """Service shutdown: cancel the run; it still sends its one terminal event."""
        self._stopping = True
        if self._stream is not None:
            self._stream.cancel()

    async def serve(self) -> None:
        """Answer the request: a JSON error, a preflight, or the run's event stream."""
        request = self.exchange.request
        origin = request.headers.get("origin")
        admitted = admit_client(Handshake(headers=request.headers), self.spec, self.credentials)
        if isinstance(admitted, Refusal) and admitted.status == 403:  # no CORS answer for an origin refused
            await self._error(admitted.status, admitted.code, admitted.message)
            return
        cors = [("access-control-allow-origin", origin), ("vary", "origin")] if origin else []
        if request.method == "OPTIONS":  # a preflight carries no token: it is answered before the token check
            preflight = [
                ("access-control-allow-methods", "POST, OPTIONS"),
                ("access-control-allow-headers", "authorization, content-type, accept"),
                ("access-control-max-age", "600"),
            ]
            await self.exchange.respond(204, b"", "text/plain", [*cors, *preflight])
            return
        if isinstance(admitted, Refusal):
            await self._error(admitted.status, admitted.code, admitted.message, admitted.headers)
            return
        try:
            run = parse_run_input(
                request.body,
                assistant=_path_assistant(request.path),
                client_roles=USER_ROLES | set(self.spec.allow_client_roles),
            )
        except InputError as error:
            await self._error(error.status, RunErrorCode.BAD_REQUEST, str(error), cors)
            return
        try:
            slot = admit_run(self.budget, admitted, stopping=self._stopping)
        except TooManyRuns as refused:  # 429: this principal's share is taken; 503: the whole service is full
            await self._error(429 if refused.principal_limit else 503, refused.code, str(refused), cors)
            return
        except RunError as refused:  # shutting down
            await self._error(503, refused.code, str(refused), cors)
            return
        try:
            if run.proxied is not None:
                await self._proxied(run, admitted, cors)
            else:
                await self._run(run.to_request(admitted), cors, slot)
        finally:
            slot.release()  # a run that never started (one that did gave it back as it ended)

    async def _proxied(self, run: AguiRun, principal: str | None, cors: list[tuple[str, str]]) -> None:
        """An app's proxied request: ``RUN_STARTED`` and ``RUN_FINISHED`` with its answer (no run, no history)."""
        try:
            result = await proxied_answer(self.runtime, run.thread_id, run.proxied, principal)
        except RunError as error:
            await self._error(_STATUS.get(error.code, 500), error.code, str(error), cors)
            return
        await self.exchange.start_stream(200, _ENCODER.get_content_type(), cors)
        for event in proxy_events(run.thread_id, run.run_id, result):
            await self._send_sse(event)
        await self.exchange.end()

    async def _run(self, request: RunRequest, cors: list[tuple[str, str]], slot: RunSlot) -> None:
        """Start the run and stream its events; the client going away cancels it. The run's slot is given back
        when the run ends, not when its last event has reached the client."""
        async with trio.open_nursery() as nursery:

            async def refuse(error: Exception) -> None:
                """A run that failed before its stream started: an HTTP error, never a stream."""
                if isinstance(error, RunError):
                    await self._error(_STATUS.get(error.code, 500), error.code, str(error), cors)
                else:
                    internal = f"internal error: {type(error).__name__}"
                    await self._error(500, RunErrorCode.INTERNAL_ERROR, internal, cors)
                nursery.cancel_scope.cancel()

            async def start(stream: EventStream) -> None:
                """The run's stream is open: answer 200 and stream; from now on the client is watched."""
                self._stream = stream
                nursery.start_soon(slot.release_when_done, stream)
                if self._stopping:
                    stream.cancel()
                await self.exchange.start_stream(200, _ENCODER.get_content_type(), cors)
                nursery.start_soon(self._watch_client, nursery.cancel_scope)

            try:
                if await self.runtime.run_exists(request.run_id):
                    message = f"runId {request.run_id!r} is taken: every run needs an id of its own"
                    await self._error(409, ErrorFrameCode.DUPLICATE_RUN_ID, message, cors)
                    return
            except RunError as error:
                await refuse(error)
                return
            relay = RunRelay(request.run_id, request.thread_id, self._send_sse, refuse)
            await relay.relay(self.runtime.open_run(request), start)
            if relay.streaming:
                await self.exchange.end()
            nursery.cancel_scope.cancel()

    async def _send_sse(self, event: EventDict) -> None:
        """One event, framed as a Server-Sent Events message."""
        await self.exchange.send(encode_sse(event))

    async def _watch_client(self, scope: trio.CancelScope) -> None:
        """Cancel everything of this request once the client has gone (see the module docstring): its input
        ends, then a probe finds its connection reset (a client that only half-closed takes the probes)."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self.exchange.wait_closed()
            while True:
                await self.exchange.send(PROBE)
                await trio.sleep(PROBE_INTERVAL)
        scope.cancel()

    async def _error(self, status: int, code: str, message: str, headers: Sequence[tuple[str, str]] = ()) -> None:
        await self.exchange.respond_json(status, {"error": {"code": str(code), "message": message}}, headers)


def _path_assistant(path: str) -> str | None:
    """The assistant ``/agui/{assistant}`` names (``None`` for ``/agui``)."""
    rest = path[len(AGUI_PATH) :].strip("/")
    return urllib.parse.unquote(rest) or None
