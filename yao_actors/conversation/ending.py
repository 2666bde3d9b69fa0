"""How a run ends: its result, its last events (exactly one terminal event) and how the store closes its record.

The conversation actor's close-out (:meth:`~yao_actors.conversation.actor._ConversationActor.close_out`) goes
by these: :func:`conclude` makes the run's result of how it ended, :func:`emit_ending` emits what the run left
open and then its one terminal event, :func:`finish_record` says how the store closes the run's record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from yao_actors.conversation.loop.answer import Answer
from yao_actors.conversation.loop.run import Run
from yao_actors.conversation.order import RunOrder, RunResult
from yao_actors.errors import RunError, RunErrorCode
from yao_actors.events import Outcome
from yao_actors.models.base import Usage
from yao_actors.store import RunFinish, RunStatus
from yao_actors.tools.results import ToolCallResult


class RunCancelled:
    """How a run ended that was cancelled before it ended by itself (a value, not trio's exception)."""


CANCELLED = RunCancelled()
Ending = Answer | RunError | RunCancelled


def conclude(run: Run, order: RunOrder, ending: Ending) -> RunResult:
    """The run's result; an answer's message joins the transcript."""
    result = RunResult(
        run_id=order.run_id,
        thread_id=order.thread_id,
        text=run.last_text,
        tool_results=tuple(run.results),
        usage=run.usage,
        outcome=Outcome.CANCELLED,
    )
    if isinstance(ending, RunError):
        return attrs.evolve(result, outcome=Outcome.ERROR, error=str(ending), code=ending.code)
    if isinstance(ending, Answer):
        if ending.message is not None:
            run.transcript.append(ending.message)
        return attrs.evolve(
            result,
            text=ending.text,
            outcome=ending.outcome,
            data=ending.data,
            note=ending.note,
            pending_tool_calls=ending.pending,
            interrupts=ending.interrupts,
            authorizations=ending.authorizations,
        )
    return result


async def emit_ending(run: Run, result: RunResult, unreported: Sequence[ToolCallResult]) -> None:
    """The last events of a run: what was left open, then exactly one terminal event."""
    events = run.events
    if events.seq == 0:
        await events.run_started()
    await run.emit_settled(unreported)
    if result.outcome is Outcome.ERROR:
        await events.run_error(result.error or "", code=result.code or RunErrorCode.RUN_ERROR, usage=run.usage)
    else:
        cancelled_run = result.outcome is Outcome.CANCELLED
        await events.run_finished(
            _finished_value(result),
            cancelled=cancelled_run,
            usage=run.usage,
            pending_tool_call_ids=result.pending_tool_calls,
            interrupts=[
                *(pending.interrupt() for pending in result.interrupts),
                *(dict(asked) for asked in result.authorizations),
            ],
        )


def as_failed(result: RunResult, error: RunError) -> RunResult:
    """``result`` as a run that ended with ``error``."""
    return attrs.evolve(
        result, outcome=Outcome.ERROR, error=str(error), code=error.code, interrupts=(), authorizations=()
    )


def finish_record(result: RunResult) -> RunFinish:
    """How the store closes the record of a run that ended with ``result``."""
    return RunFinish(_status(result), result.outcome.value, _usage_record(result.usage))


def _finished_value(result: RunResult) -> dict[str, Any]:
    """``RUN_FINISHED.result``: the answer, how the run ended, and its tool calls in brief."""
    value: dict[str, Any] = {
        "text": result.text,
        "outcome": result.outcome.value,
        "toolCalls": [
            {"toolCallId": r.call_id, "name": r.name, "ok": r.ok, **({"kind": r.kind.value} if r.kind else {})}
            for r in result.tool_results
        ],
    }
    if result.note is not None:
        value["note"] = result.note
    if result.data is not None:
        value["data"] = result.data
    return value


def _status(result: RunResult) -> RunStatus:
    """The stored status of a run that ended with ``result``."""
    return RunStatus.FAILED if result.outcome is Outcome.ERROR else RunStatus.FINISHED


def _usage_record(usage: Usage) -> dict[str, int]:
    """A run's usage as its stored record keeps it (OpenAI's names)."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
