"""What a server actor does when its server asks the user during a call.

A handshake-era server asks with ``elicitation/create`` while a call runs; a 2026-07-28 server ends the call with
an input round. In process, the embedder's input handler answers (at most ``input_timeout`` seconds). Without
one, the call ends ``input_required`` (the run makes it an interrupt): a 2026-07-28 round is kept with the thread
and the call is made again with the answers; a handshake-era call is held open here (*parked*) until the answer
comes through :meth:`~yao_actors.tools.server_handle.ServerHandle.resume_parked`, in this process or, with a
relay, in another process sharing the store (:mod:`~yao_actors.tools.parked_relay`).
"""

from __future__ import annotations

import contextvars
import logging
import secrets

import attrs
import mcp
import mcp.types
import trio
from mcp.client.session import ClientRequestContext, ElicitationFnT

from yao_actors.errors import ErrorKind
from yao_actors.specs import ServerSpec
from yao_actors.tools.askers import Askers
from yao_actors.tools.call_request import CallRequest
from yao_actors.tools.input_requests import (
    ASKS_THE_USER,
    InputAnswer,
    InputHandler,
    InputRound,
    ParkedQuestion,
    elicit_result,
    input_request,
    input_round,
    refusal,
)
from yao_actors.tools.parked_relay import ParkedRelay
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.server_status import ServerStatus

logger = logging.getLogger(__name__)

#: The call a worker task is making: an ``elicitation/create`` that arrives in that task's context belongs to it.
CALLING: contextvars.ContextVar[CallRequest | None] = contextvars.ContextVar("yao_actors_calling", default=None)


def input_required_outcome(server: str, request: CallRequest, result: mcp.types.InputRequiredResult) -> ToolOutcome:
    """A 2026-07-28 call that asks the user: its round, to keep with the thread until the answers come."""
    duration = trio.current_time() - request.started
    round_ = input_round(server, request.name, request.arguments, result)
    if isinstance(round_, str):
        return ToolOutcome(error=round_, kind=ErrorKind.TOOL_ERROR, duration=duration)
    return ToolOutcome(result=round_, error=ASKS_THE_USER, kind=ErrorKind.INPUT_REQUIRED, duration=duration)


@attrs.define(eq=False)
class ServerQuestions:
    """How one server actor answers its server's questions: the input handler, or parking the call."""

    spec: ServerSpec
    status: ServerStatus
    nursery: trio.Nursery
    """The actor's nursery, where a parked call's answers from the store are awaited."""
    handler: InputHandler | None = None
    relay: ParkedRelay | None = None
    """How a call held here is answered from another process sharing the store."""
    #: Whether the server has asked a question its transport did not tie to a call: then its connections run
    #: calls one at a time (:mod:`~yao_actors.tools.askers`), this one and the next.
    untied: bool = False

    def elicitation_callback(self, askers: Askers) -> ElicitationFnT:
        """How the connection answers ``elicitation/create``: through the input handler, or by parking the call.

        The SDK's own input-round driver (protocol 2026-07-28) calls it too, in the call's task. A handshake-era
        request is tied to its call by the task that sent the call where the transport keeps it (streamable
        HTTP); else :class:`~yao_actors.tools.askers.Askers` tells which call asked, or refuses the question
        (and from then on the actor's connections run their calls one at a time). A URL the user must not be
        sent to is refused before anyone is asked.
        """
        handler = self.handler
        askers.one_at_a_time = self.untied

        async def on_elicit(
            context: ClientRequestContext, params: mcp.types.ElicitRequestParams
        ) -> mcp.types.ElicitResult | mcp.types.ErrorData:
            if (refused := refusal(params)) is not None:
                logger.warning("server %r: %s", self.spec.id, refused, extra={"server": self.spec.id})
                return mcp.types.ErrorData(code=mcp.types.INVALID_PARAMS, message=refused)
            request: CallRequest | str | None = CALLING.get()
            if request is None:
                self.untied = askers.one_at_a_time = True
                request = await askers.asker()
            if isinstance(request, str):
                logger.warning("server %r: %s", self.spec.id, request, extra={"server": self.spec.id})
                return mcp.types.ErrorData(code=mcp.types.INVALID_REQUEST, message=request)
            askers.ask_user(request)
            try:
                if handler is None:
                    return await self._park(request, str(context.request_id), params)
                return await self._ask(handler, request, params)
            finally:
                await askers.resume(request)

        return on_elicit

    async def _park(
        self, request: CallRequest, key: str, params: mcp.types.ElicitRequestParams
    ) -> mcp.types.ElicitResult | mcp.types.ErrorData:
        """Hold a handshake-era call open while its question goes out as an interrupt, ``input_timeout`` at most.

        The caller gets an ``input_required`` outcome now (a second question of the same call goes to whoever
        answered the first); the answer comes through :meth:`ServerHandle.resume_parked`, in this process or (with
        a relay: the call is recorded in the store as held here first) in another sharing the store. Unanswered in
        time, the server is told ``cancel``. From the answer on, the call has ``spec.timeout`` again.
        """
        if request.scope.cancel_called:  # its caller has gone (timed out, cancelled): nobody would see it
            return elicit_result(InputAnswer("cancel"), None)
        question = ParkedQuestion(secrets.token_urlsafe(12))
        form = input_request(self.spec.id, request.name, params)
        asked = InputRound(((key, form),), request.arguments, ticket=question.ticket)
        held_in_store = self.relay is not None and await self.relay.hold(question.ticket)
        duration = trio.current_time() - request.started
        self.status.park(question)  # no checkpoint from here to the wait's ``finally``
        if held_in_store:
            self._serve_from_store(question)
        request.answer(ToolOutcome(result=asked, error=ASKS_THE_USER, kind=ErrorKind.INPUT_REQUIRED, duration=duration))
        request.parked = question
        answer = InputAnswer("cancel")
        try:
            with trio.move_on_after(self.spec.input_timeout):
                answer = await question.wait_answer()
        finally:
            self.status.unpark(question.ticket)
        request.scope.deadline = trio.current_time() + self.spec.timeout
        return elicit_result(answer, form.schema)

    def _serve_from_store(self, question: ParkedQuestion) -> None:
        """Serve answers to the call held for ``question`` that come through the store (from another process the
        resume reached), for as long as it is held here (:meth:`ParkedRelay.serve`)."""
        relay, status, ticket = self.relay, self.status, question.ticket
        assert relay is not None

        async def resume(answer: InputAnswer) -> ToolOutcome | None:
            return await status.answer_parked(ticket, answer)

        self.nursery.start_soon(relay.serve, ticket, question.wait_closed, resume)

    async def _ask(
        self, handler: InputHandler, request: CallRequest, params: mcp.types.ElicitRequestParams
    ) -> mcp.types.ElicitResult | mcp.types.ErrorData:
        """Ask ``handler``, at most ``spec.input_timeout`` seconds (then the answer is ``cancel``)."""
        asked = input_request(self.spec.id, request.name, params)
        answer = InputAnswer("cancel")
        with request.deadline_paused(), trio.move_on_after(self.spec.input_timeout) as waiting:
            try:
                answer = await handler(asked)
            except Exception as exc:
                logger.exception("server %r: the input handler failed", self.spec.id, extra={"server": self.spec.id})
                return mcp.types.ErrorData(
                    code=mcp.types.INTERNAL_ERROR, message=f"the input handler failed: {type(exc).__name__}"
                )
        if waiting.cancelled_caught:
            logger.info(
                "server %r: no answer to %r within %gs: cancelled",
                self.spec.id,
                asked.message,
                self.spec.input_timeout,
                extra={"server": self.spec.id},
            )
        return elicit_result(answer, asked.schema)
