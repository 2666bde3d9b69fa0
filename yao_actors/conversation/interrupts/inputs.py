"""A server's questions to the user as AG-UI interrupts: kept with the thread, answered by the next run's ``resume``.

A call whose server asks the user for input (an ``input_required`` outcome holding an
:class:`~yao_actors.tools.input_requests.InputRound`) is not answered in the run: once the batch's
other calls are done, the run ends ``RUN_FINISHED`` with an ``interrupt`` outcome holding one
:class:`PendingInput` per question, beside any approvals. Each is an AG-UI ``Interrupt`` with reason
``input_required`` (``message``, ``toolCallId``, the requested schema as ``responseSchema``,
``expiresAt``) or ``url_required`` (``message``, ``url``, ``elicitationId``).

The next run answers them with ``resume`` entries ``{"interruptId", "status": "resolved", "payload":
{"action": "accept" | "decline" | "cancel", "content": {...}}}`` (``status: "cancelled"`` is a cancel).
``content`` is checked against the question's schema first, by the schema gate (``invalid_resume`` naming the
field, an object value too; the interrupt stays open). Then the pending questions are cleared in the store, *before* the answers go out
(at most once, as with approvals), and each call gets its answers: a 2026-07-28 call is made again with
``input_responses`` and its ``request_state`` (on any worker, after any restart), a handshake-era call
held open by its server actor gets them there — in this process, or in another sharing the store, through the
store (:mod:`yao_actors.tools.parked_relay`; the run goes on here with the call's result). When no live process
holds it any more, the run ends ``interrupt_expired`` and the call is left to the next run, which tells the model
it could not complete.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from yao_actors.conversation.interrupts.approvals import PendingApproval, readable_records, stored_approvals
from yao_actors.errors import ErrorKind, RunError, RunErrorCode
from yao_actors.models.base import ToolCall
from yao_actors.tools.input_requests import InputAction, InputAnswer, InputRequest, InputRound, elicit_result
from yao_actors.tools.results import ToolCallResult
from yao_actors.tools.schema_gate import answer_problem
from yao_actors.tools.tool_server import CallAnswers

#: The ``reason`` of a question with a form, and of one with a URL to visit.
FORM_REASON: Final = "input_required"
URL_REASON: Final = "url_required"
#: What the model is told when the open call could not be given the user's answer.
_ACTIONS: Final = ("accept", "decline", "cancel")


@attrs.frozen
class PendingInput:
    """One question of a call waiting for the user: its interrupt id, the model's call, the server's question,
    and how the answer reaches the server (``request_state`` to call again, or the ``ticket`` of the held call)."""

    interrupt_id: str
    call: ToolCall
    server: str
    key: str
    question: InputRequest
    arguments: Mapping[str, Any]
    expires_at: float
    request_state: str | None = None
    ticket: str | None = None

    def interrupt(self) -> dict[str, Any]:
        """The AG-UI ``Interrupt`` of this question."""
        question = self.question
        data: dict[str, Any] = {
            "id": self.interrupt_id,
            "reason": URL_REASON if question.kind == "url" else FORM_REASON,
            "message": question.message,
            "toolCallId": self.call.id,
            "expiresAt": datetime.datetime.fromtimestamp(self.expires_at, datetime.UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "metadata": {"server": self.server, "tool": question.tool},
        }
        if question.kind == "url":
            # Also in metadata: AG-UI's Interrupt has no url field, and its official client keeps only the fields it
            # knows (and metadata) of an interrupt.
            data |= {"url": question.url, "elicitationId": question.elicitation_id}
            data["metadata"] |= {"url": question.url, "elicitationId": question.elicitation_id}
        else:
            data["responseSchema"] = dict(question.schema or {})
        return data

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready record, kept with the thread beside its pending approvals."""
        question = attrs.asdict(self.question)
        call = {"id": self.call.id, "name": self.call.name, "arguments": self.call.arguments}
        return {
            "reason": URL_REASON if self.question.kind == "url" else FORM_REASON,
            "interruptId": self.interrupt_id,
            "call": call,
            "server": self.server,
            "key": self.key,
            "question": question,
            "arguments": dict(self.arguments),
            "expiresAt": self.expires_at,
            "requestState": self.request_state,
            "ticket": self.ticket,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> PendingInput:
        """The pending question of a :meth:`to_record` record; ``ValueError`` saying what is wrong."""
        try:
            call, question = record["call"], record["question"]
            return cls(
                str(record["interruptId"]),
                ToolCall(str(call["id"]), str(call["name"]), str(call["arguments"])),
                str(record["server"]),
                str(record["key"]),
                InputRequest(**question),
                dict(record["arguments"]),
                float(record["expiresAt"]),
                record.get("requestState"),
                record.get("ticket"),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a pending question: {type(error).__name__}: {error}") from None


def is_input_record(record: Mapping[str, Any]) -> bool:
    """Whether a stored pending record is a question (else an approval)."""
    return isinstance(record, Mapping) and record.get("reason") in (FORM_REASON, URL_REASON)


def held_inputs(
    results: Sequence[ToolCallResult], calls: Sequence[ToolCall], now: float, timeout: Callable[[str], float]
) -> list[PendingInput]:
    """The questions of a batch's ``input_required`` results; ``timeout(server)`` is how long each may wait."""
    by_id = {call.id: call for call in calls}
    pending: list[PendingInput] = []
    for result in results:
        if result.kind is not ErrorKind.INPUT_REQUIRED or not isinstance(result.result, InputRound):
            continue
        asked = result.result
        for number, (key, question) in enumerate(asked.questions):
            pending.append(
                PendingInput(
                    f"input-{result.call_id}-{number}",
                    by_id.get(result.call_id) or ToolCall(result.call_id, result.name, result.arguments),
                    result.server,
                    key,
                    question,
                    asked.arguments,
                    now + timeout(result.server),
                    asked.request_state,
                    asked.ticket,
                )
            )
    return pending


def answer_of(index: int, entry: Mapping[str, Any], pending: PendingInput) -> InputAnswer:
    """The :class:`InputAnswer` a ``resume`` entry gives; ``RunError`` ``invalid_resume`` naming the field."""
    where = f"resume[{index}]"
    if entry.get("status") == "cancelled":
        return InputAnswer("cancel")
    payload = entry.get("payload")
    if not isinstance(payload, Mapping):
        raise RunError(f"{where}.payload: an object with 'action' is required", code=RunErrorCode.INVALID_RESUME)
    action = payload.get("action")
    if action not in _ACTIONS:
        raise RunError(
            f"{where}.payload.action: must be one of 'accept', 'decline', 'cancel', got {action!r:.80}",
            code=RunErrorCode.INVALID_RESUME,
        )
    checked: InputAction = action
    content = payload.get("content")
    if checked != "accept" or pending.question.kind == "url":
        return InputAnswer(checked)
    if not isinstance(content, Mapping):
        raise RunError(f"{where}.payload.content: an object is required", code=RunErrorCode.INVALID_RESUME)
    problem = answer_problem(content, pending.question.schema)
    if problem is not None:
        field, message = problem
        at = f"{where}.payload.content" + (f".{field}" if field else "")
        raise RunError(f"{at}: {message}", code=RunErrorCode.INVALID_RESUME)
    return InputAnswer("accept", dict(content))


@attrs.frozen
class Answered:
    """The answers the ``resume`` entries gave, by pending question (unanswered ones: ``cancel``)."""

    answers: tuple[tuple[PendingInput, InputAnswer], ...] = ()

    def by_call(self) -> dict[str, list[tuple[PendingInput, InputAnswer]]]:
        calls: dict[str, list[tuple[PendingInput, InputAnswer]]] = {}
        for pending, answer in self.answers:
            calls.setdefault(pending.call.id, []).append((pending, answer))
        return calls


def resolve_inputs(
    pending: Sequence[PendingInput], resume: Sequence[Mapping[str, Any]], now: float
) -> tuple[Answered, list[Mapping[str, Any]]]:
    """Match ``resume`` entries to the thread's pending questions: the answers, and the entries left (for the
    approvals). Every answer is checked before anything is decided; a question past its ``expiresAt``
    answered ``resolved`` is ``interrupt_expired``."""
    by_id = {p.interrupt_id: p for p in pending}
    given: dict[str, InputAnswer] = {}
    rest: list[Mapping[str, Any]] = []
    for index, entry in enumerate(resume):
        waiting = by_id.get(entry.get("interruptId"))  # type: ignore[arg-type]
        if waiting is None:
            rest.append(entry)
            continue
        if now > waiting.expires_at and entry.get("status") == "resolved":
            raise RunError(
                f"resume[{index}]: interrupt {waiting.interrupt_id!r} expired; the tool got no answer",
                code=RunErrorCode.INTERRUPT_EXPIRED,
            )
        given[waiting.interrupt_id] = answer_of(index, entry, waiting)
    answers = tuple((p, given.get(p.interrupt_id, InputAnswer("cancel"))) for p in pending)
    return Answered(answers), rest


def call_answers(answers: Sequence[tuple[PendingInput, InputAnswer]]) -> CallAnswers:
    """How one call gets its user's answers: a 2026-07-28 call is made again with ``input_responses`` and its
    ``request_state``; a handshake-era one gets its answer in the server actor that holds it open, here or in
    another process sharing the store."""
    first, answer = answers[0]
    if first.ticket is not None:
        return CallAnswers(first.arguments, ticket=first.ticket, answer=answer)
    responses = {pending.key: elicit_result(given, pending.question.schema) for pending, given in answers}
    return CallAnswers(first.arguments, responses, first.request_state)


Pending = PendingApproval | PendingInput
"""What a thread can wait for a person on: an approval, or the answer to a server's question."""


def stored_pending(thread_id: str, records: Sequence[Mapping[str, Any]]) -> list[Pending]:
    """The approvals and questions a store kept for a thread; a record that cannot be read is left out and
    logged (a resume naming it is then ``unknown_interrupt``)."""
    approvals = stored_approvals(thread_id, [r for r in records if not is_input_record(r)])
    questions = [r for r in records if is_input_record(r)]
    return [*approvals, *readable_records(thread_id, "question", questions, PendingInput.from_record)]


async def gone_calls(answered: Answered, reaches: Callable[[str, str], Awaitable[bool]]) -> list[PendingInput]:
    """The held handshake-era calls no live server actor holds any more (``reaches(server, ticket)``: here, or
    in another process sharing the store)."""
    return [p for p, _ in answered.answers if p.ticket is not None and not await reaches(p.server, p.ticket)]
