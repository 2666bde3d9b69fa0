"""Human approval of tool calls: AG-UI 1.0 interrupts (``RUN_FINISHED`` outcome ``interrupt``, then ``resume``).

Which calls need a person's approval (:class:`ApprovalPolicy`): every tool of a server configured
``approval: true``, the tools a server's ``approval`` list names, and the flat names an assistant's ``approval``
lists (``server__tool``, or ``server__*`` for all of a server's tools), and with the assistant's ``"destructive"``
every tool not read-only and not marked ``destructiveHint: false`` (MCP's defaults). When the model calls one, the batch's
other calls run and the run ends with ``RUN_FINISHED`` whose outcome is ``{"type": "interrupt", "interrupts"}``:
one :class:`PendingApproval` per held call, each an AG-UI ``Interrupt`` with ``reason`` ``tool_approval``, the
``toolCallId``, a ``message`` naming the tool and its arguments, the :data:`RESPONSE_SCHEMA` and ``expiresAt``
(``approval_timeout`` seconds on).

The held calls are kept with the thread, in its conversation store too (written before the interrupt goes out,
cleared when the run answering them starts), so they survive a restart with a durable store. The next run
answers them (:func:`resolve`) with ``resume`` entries ``{"interruptId", "status": "resolved", "payload":
{"approved": true, "arguments"?: {...}}}``: an approved call runs (with the edited ``arguments`` when given,
validated like any call), a denial or ``status: "cancelled"`` gives the model a tool result saying the user
declined, and the loop goes on. A resume entry for an interrupt the thread does not have is ``RUN_ERROR``
``unknown_interrupt``, one past its ``expiresAt`` ``interrupt_expired``; a run with no ``resume`` while calls wait
cancels them (the model is told they were not approved).
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

import attrs

from yao_actors.errors import RunError, RunErrorCode
from yao_actors.models.base import Message, ToolCall
from yao_actors.specs import DESTRUCTIVE, AssistantSpec
from yao_actors.tools.catalog import Catalog
from yao_actors.tools.hints import ToolHints

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The ``reason`` of an approval interrupt.
REASON: Final = "tool_approval"
#: The answer an approval interrupt expects (AG-UI ``Interrupt.responseSchema``).
RESPONSE_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "arguments": {"type": "object"}},
    "required": ["approved"],
}
#: What the model is told about a call the user declined.
DECLINED: Final = "Error: the user declined this call; it was not run"
#: What the model is told about a call the user left unanswered and went on.
NOT_APPROVED: Final = "Error: this call was not approved (the user went on without answering); it was not run"


@attrs.frozen
class ApprovalPolicy:
    """Which calls need approval: ``servers`` maps a server id to ``True`` (every tool) or the tools that do."""

    servers: Mapping[str, bool | frozenset[str]] = attrs.field(factory=dict)

    def holds_any(self, assistant: AssistantSpec) -> bool:
        """Whether any call of ``assistant`` can need approval (with no rule at all, none is looked up)."""
        return bool(self.servers or assistant.approval)

    def needs(
        self, assistant: AssistantSpec, name: str, server: str | None, tool: str | None, hints: ToolHints | None = None
    ) -> bool:
        """Whether a call of flat name ``name`` (the tool ``tool`` of ``server``, with ``hints``) needs approval."""
        rule = self.servers.get(server or "", False)
        if rule is True or (isinstance(rule, frozenset) and tool in rule):
            return True
        if hints is not None and hints.may_destroy and DESTRUCTIVE in assistant.approval:
            return True
        return any(
            name == pattern or (pattern.endswith("__*") and name.startswith(pattern[:-1]))
            for pattern in assistant.approval
        )


@attrs.frozen
class PendingApproval:
    """A held call waiting for a person: the interrupt id, the call, when it expires (POSIX time)."""

    interrupt_id: str
    call: ToolCall
    expires_at: float

    def interrupt(self) -> dict[str, Any]:
        """The AG-UI ``Interrupt`` of this call."""
        return {
            "id": self.interrupt_id,
            "reason": REASON,
            "message": f"Approve calling {self.call.name} with arguments {self.call.arguments or '{}'}?",
            "toolCallId": self.call.id,
            "responseSchema": dict(RESPONSE_SCHEMA),
            "expiresAt": datetime.datetime.fromtimestamp(self.expires_at, datetime.UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
        }

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready record (to keep with the thread)."""
        call = {"id": self.call.id, "name": self.call.name, "arguments": self.call.arguments}
        return {"interruptId": self.interrupt_id, "call": call, "expiresAt": self.expires_at}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> PendingApproval:
        """The pending approval of a :meth:`to_record` record; ``ValueError`` naming the field that is wrong."""
        call = record.get("call") if isinstance(record, Mapping) else None
        if not isinstance(call, Mapping):
            raise ValueError("'call' must be an object")
        for where, value in (
            ("interruptId", record.get("interruptId")),
            *((f"call.{k}", call.get(k)) for k in ("id", "name", "arguments")),
        ):
            if not isinstance(value, str):
                raise ValueError(f"{where!r} must be a string, got {value!r:.80}")
        expires_at = record.get("expiresAt")
        if isinstance(expires_at, bool) or not isinstance(expires_at, int | float):
            raise ValueError(f"'expiresAt' must be a number, got {expires_at!r:.80}")
        return cls(record["interruptId"], ToolCall(call["id"], call["name"], call["arguments"]), float(expires_at))


def readable_records(
    thread_id: str, what: str, records: Sequence[Mapping[str, Any]], read: Callable[[Mapping[str, Any]], T]
) -> list[T]:
    """What ``read`` makes of the ``what`` records (approvals, questions) a store kept for a thread; a record it
    cannot read (``ValueError``) is left out and logged (a resume naming it is then ``unknown_interrupt``), so one
    bad record never keeps the thread from loading."""
    kept: list[T] = []
    for index, record in enumerate(records):
        try:
            kept.append(read(record))
        except ValueError as error:
            logger.warning("thread %s: stored %s %d left out, it is unreadable: %s", thread_id, what, index, error)
    return kept


def stored_approvals(thread_id: str, records: Sequence[Mapping[str, Any]]) -> list[PendingApproval]:
    """The pending approvals a store kept for a thread (:func:`readable_records`)."""
    return readable_records(thread_id, "approval", records, PendingApproval.from_record)


def hold(call: ToolCall, now: float, timeout: float) -> PendingApproval:
    """The pending approval of a held call, expiring ``timeout`` seconds from ``now``."""
    return PendingApproval(f"approval-{call.id}", call, now + timeout)


def split_held(
    policy: ApprovalPolicy, assistant: AssistantSpec, calls: Sequence[ToolCall], catalog: Catalog, now: float
) -> tuple[list[ToolCall], list[PendingApproval]]:
    """A batch's calls: those that run now, and those held for approval (in the model's order)."""
    run: list[ToolCall] = []
    held: list[PendingApproval] = []
    if not policy.holds_any(assistant):  # the usual case
        return list(calls), held
    for call in calls:
        entry = catalog.resolve(call.name)
        server, tool = (entry.server, entry.tool) if entry is not None else (None, None)
        if policy.needs(assistant, call.name, server, tool, entry.hints if entry is not None else None):
            held.append(hold(call, now, assistant.approval_timeout))
        else:
            run.append(call)
    return run, held


@attrs.frozen
class Resolution:
    """What the ``resume`` entries decided: the calls to run now (edited), and tool messages for the others."""

    approved: tuple[ToolCall, ...] = ()
    refused: tuple[Message, ...] = ()


def resolve(pending: Sequence[PendingApproval], resume: Sequence[Mapping[str, Any]], now: float) -> Resolution:
    """Match ``resume`` entries to the thread's pending approvals; raise ``RunError`` for a bad entry.

    Every entry is checked before anything is decided: an id the thread does not wait for is
    ``unknown_interrupt``, an approval past its expiry ``interrupt_expired`` (cancelling one is fine). A pending
    call no entry answers is cancelled (not approved).
    """
    by_id = {p.interrupt_id: p for p in pending}
    answers: dict[str, Mapping[str, Any]] = {}
    for index, entry in enumerate(resume):
        interrupt_id = entry.get("interruptId")
        waiting = by_id.get(interrupt_id) if isinstance(interrupt_id, str) else None
        if waiting is None:
            raise RunError(
                f"resume[{index}]: no interrupt {interrupt_id!r} is waiting on this thread",
                code=RunErrorCode.UNKNOWN_INTERRUPT,
            )
        if now > waiting.expires_at and entry.get("status") == "resolved":
            raise RunError(
                f"resume[{index}]: interrupt {interrupt_id!r} expired; its call was not run",
                code=RunErrorCode.INTERRUPT_EXPIRED,
            )
        answers[waiting.interrupt_id] = entry
    approved: list[ToolCall] = []
    refused: list[Message] = []
    for waiting in pending:
        answer = answers.get(waiting.interrupt_id)
        payload = answer.get("payload") if answer is not None else None
        if answer is None or answer.get("status") != "resolved" or not isinstance(payload, Mapping):
            refused.append(_tool_message(waiting.call, NOT_APPROVED if answer is None else DECLINED))
        elif payload.get("approved") is True:
            arguments = payload.get("arguments")
            edited = (
                waiting.call
                if not isinstance(arguments, Mapping)
                else attrs.evolve(waiting.call, arguments=json.dumps(arguments, ensure_ascii=False))
            )
            approved.append(edited)
        else:
            refused.append(_tool_message(waiting.call, DECLINED))
    return Resolution(tuple(approved), tuple(refused))


def _tool_message(call: ToolCall, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call.id, "content": content}
