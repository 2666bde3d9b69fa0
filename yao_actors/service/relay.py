"""The relay of one run to one client, the same for both front ends: the websocket and ``POST /agui`` differ only
in how an event is framed (a websocket message, an SSE ``data:`` line) and in how a client is answered before its
run has started (an ``error``/``RUN_ERROR`` frame, an HTTP error).

Both admit a client the same way (:func:`admit_client`: the ``Origin`` check, then the bearer token) and a run the
same way (:func:`admit_run`: not while shutting down, within ``server.max_runs`` and the principal's share), and
relay it the same way (:class:`RunRelay`): the run's events in order, the last ``seq`` the client got, and exactly
one terminal event — the run's own, or a ``RUN_ERROR`` from here when the run was refused, failed, or ended
without one, numbered after the events the client already has. A relay may also follow a run it did not start
(a websocket ``resume``): a store out of reach then is an ``error`` frame (resume later), not the run's end.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar

import attrs
import trio

from yao_actors.conversation.request import RunRequest
from yao_actors.conversation.streaming.outlet import EventSource, forward_events
from yao_actors.errors import ErrorFrameCode, RunError, RunErrorCode
from yao_actors.events import TERMINAL_TYPES, EventDict, RunEvents
from yao_actors.service.auth import Credential, Handshake, origin_allowed, principal_of
from yao_actors.service.budget import DetachedRun, RunBudget, RunSlot
from yao_actors.service.protocol import error_frame
from yao_actors.specs import ServiceSpec

logger = logging.getLogger(__name__)

Send = Callable[[EventDict], Awaitable[None]]
"""How a front end frames and sends one event to its client."""


class EventStream(EventSource, Protocol):
    """The events of one run (``Runtime.open_run`` yields one): receive them; ``cancel`` still ends with one."""

    def cancel(self) -> None:
        """Cancel the run; its terminal event still comes through the stream."""
        ...

    def detach(self) -> None:
        """Stop reading without cancelling the run (it waits ``detach_grace`` seconds for a ``resume``)."""
        ...

    async def wait_done(self) -> None:
        """Return once the run has ended (a detached one too)."""
        ...

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]: ...


class ResumedStream(EventSource, Protocol):
    """The events of a resumed run; ``cancel`` cancels the run when it goes on in this process."""

    def cancel(self) -> None: ...

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]: ...


S = TypeVar("S", bound=ResumedStream)
"""The stream a relay reads: a run's own (:class:`EventStream`), or a resumed one's."""


class RunStarter(Protocol):
    """What a relay needs of a runtime to start a run: ``Runtime.open_run`` with a whole request."""

    def open_run(self, request: RunRequest, /) -> AbstractAsyncContextManager[EventStream]:
        """Start the run; the context yields its events and cancels the run when left early."""
        ...


@attrs.frozen
class Refusal:
    """A client refused at the door: the HTTP status, the error code, what to tell it, and headers to add."""

    status: int
    code: str
    message: str
    headers: tuple[tuple[str, str], ...] = ()


def admit_client(handshake: Handshake, spec: ServiceSpec, credentials: Sequence[Credential]) -> str | Refusal | None:
    """The principal of a client's request (``None``: no tokens, every local client is one principal), or why it is
    refused: 403 an origin ``server.allowed_origins`` does not allow, 401 a missing or wrong bearer token."""
    if not origin_allowed(handshake, spec.allowed_origins, token_required=bool(credentials)):
        origin = handshake.headers.get("origin")
        return Refusal(403, "origin_not_allowed", f"origin {origin!r} is not allowed")
    principal = principal_of(handshake, credentials)
    if credentials and principal is None:
        return Refusal(401, "unauthorized", "missing or wrong bearer token", (("www-authenticate", "Bearer"),))
    return principal


def admit_run(budget: RunBudget, principal: str | None, *, stopping: bool = False) -> RunSlot:
    """A slot for a new run of ``principal``; ``RunError`` ``shutting_down`` while the service (or the client's own
    exchange, ``stopping``) shuts down, :class:`~yao_actors.service.budget.TooManyRuns` beyond ``server.max_runs``
    or the principal's share."""
    if budget.closing or stopping:
        raise RunError("the service is shutting down", code=RunErrorCode.SHUTTING_DOWN)
    return budget.acquire(principal)


def client_gone(error: BaseException) -> bool:
    """Whether ``error`` only says the client is gone (a write found its connection broken, closed, or stalled),
    also when it comes out of a nursery inside the runtime as a group of such errors."""
    if isinstance(error, BaseExceptionGroup):
        return all(client_gone(leaf) for leaf in error.exceptions)
    return isinstance(error, trio.BrokenResourceError | trio.ClosedResourceError)


@attrs.define(eq=False)
class RunRelay:
    """One run relayed to one client (see the module docstring).

    ``send`` frames and sends an event. ``refuse``, when given, answers a run that fails before its stream is
    open (``POST /agui``: an HTTP error instead of a stream); without it such a run gets its ``RUN_ERROR`` like
    any other. ``resumed``: the relay follows a run it did not start, from ``last_seq``. The rest is the relay's
    own, changed only by it (the front end reads it).
    """

    run_id: str
    thread_id: str
    send: Send
    refuse: Callable[[Exception], Awaitable[None]] | None = None
    resumed: bool = False
    stream: ResumedStream | None = attrs.field(default=None, init=False)
    cancel_requested: bool = attrs.field(default=False, init=False)
    last_seq: int = 0
    """The ``seq`` of the last event the client got: a ``RUN_ERROR`` from here is numbered after it."""
    ended: bool = attrs.field(default=False, init=False)
    """The client has had the run's one terminal event (or its refusal)."""
    streaming: bool = attrs.field(default=False, init=False)
    """The run's stream is open and the client was told so: failures from now on are events."""
    detached: bool = attrs.field(default=False, init=False)
    """The client left while the run went on: it waits for a ``resume`` (``detach_grace``)."""

    def detach(self) -> None:
        """The client left: a run of its own goes on without it, waiting for a ``resume`` (a resumed run's stream
        only follows the run: nothing to detach)."""
        if isinstance(self.stream, DetachedRun):
            self.stream.detach()
            self.detached = not self.ended

    def cancel(self) -> None:
        """Cancel the run (at once, or as soon as its stream opens); the relay keeps reading up to its end."""
        self.cancel_requested = True
        if self.stream is not None:
            self.stream.cancel()

    async def relay(
        self, opened: AbstractAsyncContextManager[S], on_open: Callable[[S], Awaitable[None]] | None = None
    ) -> None:
        """Forward a run's events up to its terminal one; the client gets exactly one.

        ``on_open`` runs once the run's stream is open, before its first event (``POST /agui`` starts its
        response there). A run refused (``RunError``), failing (an exception: a runtime bug, an event that cannot
        be encoded) or ending without a terminal event gets a ``RUN_ERROR`` from here; a failure is logged and
        ends only its run. A client that is gone (its writes fail) ends the relay with that error.
        """
        try:
            async with opened as stream:
                self.stream = stream
                if self.cancel_requested:  # a cancel that came before the stream opened takes effect now
                    stream.cancel()
                if on_open is not None:
                    await on_open(stream)
                self.streaming = True
                await forward_events(stream, self.forward)
        except RunError as error:
            await self._fail(error, str(error), error.code)
        except Exception as error:  # a bug must not end the connection, let alone the service
            if client_gone(error):
                raise
            logger.error("run %s failed", self.run_id, exc_info=error)
            await self._fail(error, f"internal error: {type(error).__name__}", RunErrorCode.INTERNAL_ERROR)
        await self.end("the run ended without a terminal event", RunErrorCode.RUN_INCOMPLETE)

    async def forward(self, event: EventDict) -> None:
        """Send one of the run's events, noting its ``seq``, its end, and the thread a resumed run is on."""
        await self.send(event)
        seq = event.get("seq")
        if isinstance(seq, int) and seq > self.last_seq:
            self.last_seq = seq
        kind = event.get("type")
        if kind in TERMINAL_TYPES:
            self.ended = True
        elif kind == "RUN_STARTED" and isinstance(event.get("threadId"), str):
            self.thread_id = event["threadId"]

    async def _fail(self, error: Exception, message: str, code: RunErrorCode) -> None:
        """The run failed: refused before its stream opened (when the front end answers that itself), or ended."""
        if self.refuse is not None and not self.streaming and not self.ended:
            self.ended = True
            await self.refuse(error)
        else:
            await self.end(message, code)

    async def end(self, message: str, code: RunErrorCode) -> None:
        """Give a run that has not had its terminal event a ``RUN_ERROR`` (nothing for one that has); a resume
        whose store is out of reach gets an ``error`` frame: the run is not over, the client resumes later."""
        if self.ended:
            return
        self.ended = True
        if self.resumed and code is RunErrorCode.STORE_UNAVAILABLE:
            await self.send(error_frame(ErrorFrameCode.STORE_UNAVAILABLE, message, self.run_id))
            return
        # Numbered after the events the client already has: its seq goes on without a gap or a repeat.
        emitter = RunEvents(run_id=self.run_id, thread_id=self.thread_id, send=self.send, seq=self.last_seq)
        await emitter.run_error(message, code=code)
