"""A handshake-era call held open in one process, answered from another: the store carries the answer and the outcome.

A handshake-era server asks the user while its call is open (``elicitation/create``); the server actor that
runs the call holds it open (:class:`~yao_actors.tools.input_requests.ParkedQuestion`) while the question goes
out as an interrupt. The resume that answers it may reach another process sharing the store (another worker
behind a load balancer). A :class:`ParkedRelay` joins the two through the store's held calls
(:class:`~yao_actors.store.protocol.ParkedCalls`, which the stores offer as ``store.parked_calls()``):

- **the holder** (the actor holding the call) records the call as held by it before the interrupt goes out
  (:meth:`ParkedRelay.hold`), then (:meth:`ParkedRelay.serve`) renews the holding every third of its ``ttl``
  while waiting for an answer through the store. An answer that comes is given to the open call, as a resume in
  this process would; the call's outcome goes back through the store and the holding ends. When the call stops
  being held here (answered in this process, ``input_timeout`` passed, connection lost, shutdown) the holding
  is released.
- **the requester** (the process the resume reached, which runs the rest of the run: the model sees the tool's
  result there, and the loop goes on there) asks whether a live process holds the call
  (:meth:`ParkedRelay.reachable`; a holder that died stopped renewing, so after ``ttl`` nobody does, and the
  resume ends ``interrupt_expired``), then delivers the answer, at most once, and waits for the outcome
  (:meth:`ParkedRelay.answer`) for as long as the holder lives.

The outcome crosses as a JSON record (:func:`outcome_record`); a call that asks again carries its new question's
ticket, still held by the same process.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio

from yao_actors.errors import ErrorKind, StoreUnavailable
from yao_actors.store.protocol import ConversationStore, ParkedCalls
from yao_actors.tasks import patiently
from yao_actors.tools.input_requests import InputAnswer, InputRequest, InputRound
from yao_actors.tools.results import ToolOutcome

logger = logging.getLogger(__name__)

Resume = Callable[[InputAnswer], Awaitable[ToolOutcome | None]]
"""Gives the held call its answer in this process; its outcome, or ``None`` when it is no longer held."""


@attrs.frozen
class ParkedRelay:
    """One process's way to the held calls of a store; ``ttl``: how long a holding lasts unless renewed."""

    calls: ParkedCalls
    ttl: float
    holder: str = attrs.field(factory=lambda: secrets.token_hex(8))
    """This relay's token (one per runtime)."""

    @property
    def interval(self) -> float:
        """How often the holder renews and looks for an answer, and the requester for the holder's life."""
        return self.ttl / 3

    # ----------------------------------------------------------------- the holder's side

    async def hold(self, ticket: str) -> bool:
        """Record the call as held here; ``False`` (logged) when the store cannot: it is answerable here only."""
        try:
            await patiently(lambda: self.calls.hold(ticket, self.holder, self.ttl))
        except StoreUnavailable as error:
            logger.warning("a held call is answerable in this process only: %s", error)
            return False
        return True

    async def serve(self, ticket: str, closed: Callable[[], Awaitable[None]], resume: Resume) -> None:
        """Until ``closed()`` returns (the call is no longer held here): renew the holding and wait for an answer
        through the store; give one that comes to the call (``resume``) and send its outcome back. The holding is
        released at the end, whatever ends it."""
        try:
            record: dict[str, Any] | None = None
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_cancel_when, closed, nursery.cancel_scope)
                record = await self._wait_for_answer(ticket)
                nursery.cancel_scope.cancel()
            if record is not None:
                await self._answer(ticket, answer_of(record), resume)
        finally:
            # Shielded and bounded: a store out of reach lets the holding expire on its own.
            with (
                trio.CancelScope(shield=True),
                trio.move_on_after(self.interval),
                contextlib.suppress(StoreUnavailable),
            ):
                await self.calls.release(ticket, self.holder)

    async def _wait_for_answer(self, ticket: str) -> dict[str, Any] | None:
        """The answer the store brings, renewing the holding meanwhile; ``None`` once the store no longer has the
        call as held here (it was out of reach for longer than ``ttl``)."""
        while True:
            try:
                record = await self.calls.take_answer(ticket, self.holder, self.interval)
                if record is not None:
                    return record
                if not await self.calls.renew(ticket, self.holder, self.ttl):
                    logger.warning("held call %s: the store no longer has it as held here", ticket)
                    return None
            except StoreUnavailable as error:
                logger.warning("held call %s: the store is unavailable: %s", ticket, error)
                await trio.sleep(self.interval)

    async def _answer(self, ticket: str, answer: InputAnswer, resume: Resume) -> None:
        """Give the call its answer, keeping the holding alive until the outcome is sent back."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._keep, ticket)
            outcome = await resume(answer)
            nursery.cancel_scope.cancel()
        try:
            await patiently(lambda: self.calls.finish(ticket, self.holder, outcome_record(outcome)))
        except StoreUnavailable as error:
            logger.warning("held call %s: its outcome could not be sent back: %s", ticket, error)

    async def _keep(self, ticket: str) -> None:
        while True:
            await trio.sleep(self.interval)
            try:
                await self.calls.renew(ticket, self.holder, self.ttl)
            except StoreUnavailable as error:
                logger.warning("held call %s: renewing failed: %s", ticket, error)

    # ----------------------------------------------------------------- the requester's side

    async def reachable(self, ticket: str) -> bool:
        """Whether a live process holds the call; ``StoreUnavailable`` when the store cannot say."""
        return await patiently(lambda: self.calls.holder(ticket)) is not None

    async def answer(self, ticket: str, answer: InputAnswer) -> ToolOutcome | None:
        """Deliver ``answer`` to the process holding the call and wait for the call's outcome; ``None`` when no
        live process holds it (any more), or the store fails meanwhile."""
        try:
            if not await self.calls.deliver(ticket, answer_record(answer)):
                return None
            while True:
                record = await patiently(lambda: self.calls.take_outcome(ticket, self.interval))
                if record is None and await patiently(lambda: self.calls.holder(ticket)) is None:
                    # Finished just now, or the holder is gone: look once more.
                    record = await patiently(lambda: self.calls.take_outcome(ticket, 0))
                    if record is None:
                        return None
                if record is not None:
                    return outcome_of(record)
        except StoreUnavailable as error:
            logger.warning("held call %s: no outcome through the store: %s", ticket, error)
            return None


async def _cancel_when(event: Callable[[], Awaitable[None]], scope: trio.CancelScope) -> None:
    await event()
    scope.cancel()


def answer_record(answer: InputAnswer) -> dict[str, Any]:
    return {"action": answer.action, "content": None if answer.content is None else dict(answer.content)}


def answer_of(record: Mapping[str, Any]) -> InputAnswer:
    return InputAnswer(record["action"], record.get("content"))


def outcome_record(outcome: ToolOutcome | None) -> dict[str, Any]:
    """A call's outcome as JSON: every field of :class:`ToolOutcome` (``{"gone": true}``: the call was no longer
    held when its answer came); a call that asked again carries its new question as ``round``."""
    if outcome is None:
        return {"gone": True}
    record: dict[str, Any] = {field.name: getattr(outcome, field.name) for field in attrs.fields(ToolOutcome)}
    record["kind"] = None if outcome.kind is None else outcome.kind.value
    asked = outcome.result
    if isinstance(asked, InputRound):
        record["result"] = None
        record["round"] = {
            "questions": [[key, attrs.asdict(question)] for key, question in asked.questions],
            "arguments": dict(asked.arguments),
            "requestState": asked.request_state,
            "ticket": asked.ticket,
        }
    return record


def outcome_of(record: Mapping[str, Any]) -> ToolOutcome | None:
    """The :class:`ToolOutcome` of an :func:`outcome_record`."""
    if record.get("gone"):
        return None
    values = {field.name: record[field.name] for field in attrs.fields(ToolOutcome) if field.name in record}
    kind = record.get("kind")
    values["kind"] = None if kind is None else ErrorKind(kind)
    asked = record.get("round")
    if asked is not None:
        questions = tuple((str(key), InputRequest(**question)) for key, question in asked["questions"])
        values["result"] = InputRound(questions, asked["arguments"], asked.get("requestState"), asked.get("ticket"))
    return ToolOutcome(**values)


def relay_of(store: ConversationStore, ttl: float) -> ParkedRelay | None:
    """The relay of a store that offers held calls (``store.parked_calls()``); ``None`` for one that does not (a
    store of one's own without them: a held call is then answered only in the process holding it)."""
    calls = store.parked_calls()
    return None if calls is None else ParkedRelay(calls, ttl)


__all__ = ["ParkedRelay", "outcome_of", "outcome_record", "relay_of"]
