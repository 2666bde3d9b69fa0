"""How a run starts: the calls its thread holds for a person answered, its input recorded, then the model asked.

The conversation actor (:mod:`yao_actors.conversation.actor`) hands a run here once it holds the thread:
:func:`start_run` answers the calls the thread's last run held (approved calls run, refused ones are told to the
model, the user's answers go to the calls that asked), records the run as started in the store with what joins
the history, and asks the model (:func:`answer`, which a run taken up after a restart goes to as well).
"""

from __future__ import annotations

import logging

from yao_actors.conversation.durable.journal import RunJournal
from yao_actors.conversation.ending import Ending
from yao_actors.conversation.interrupts.approvals import PendingApproval, Resolution, resolve
from yao_actors.conversation.interrupts.client_tools import answer_dangling_calls, check_tool_answers
from yao_actors.conversation.interrupts.inputs import (
    Answered,
    Pending,
    PendingInput,
    call_answers,
    gone_calls,
    held_inputs,
    resolve_inputs,
)
from yao_actors.conversation.interrupts.principal_servers import is_authorization_resume
from yao_actors.conversation.loop.answer import Answer
from yao_actors.conversation.loop.run import Run
from yao_actors.conversation.loop.window import window_history
from yao_actors.conversation.order import RunOrder
from yao_actors.conversation.thread import ThreadStatus
from yao_actors.errors import ModelError, RunError, RunErrorCode, exception_leaves, store_trouble_ends_the_run
from yao_actors.events import Outcome
from yao_actors.models.base import Message
from yao_actors.specs import AssistantSpec

logger = logging.getLogger(__name__)


async def start_run(
    run: Run, order: RunOrder, history: tuple[Message, ...], status: ThreadStatus, journal: RunJournal
) -> Ending:
    """Answer the calls held for approval, record the run as started in the store with what joins the history
    (the held calls' results and the run's input), take that into the transcript, and answer it.

    A tool message answering no open call, or a ``resume`` entry for no waiting interrupt (or an expired one),
    ends the run with its error before anything runs; so does a store that cannot record the run's start.
    """
    request = order.request
    # Started with the lease (the actor's ``folded_start``): nothing held, nothing resumed.
    if journal.standing().started:
        window = window_history(history, order.assistant.history_max_messages)
        return await answer(run, order, [*window, *journal.transcript])
    try:
        check_tool_answers(history, request.messages, held=[p.call.id for p in status.approvals])
        now = run.resources.clock()
        resume = [entry for entry in request.resume if not is_authorization_resume(entry)]  # they only say: go on
        held = [p for p in status.approvals if isinstance(p, PendingInput)]
        answered, rest = resolve_inputs(held, resume, now)
        resolution = resolve([p for p in status.approvals if isinstance(p, PendingApproval)], rest, now)
        await _drop_gone(run, status, journal, answered)
        if resolution.approved or answered.answers:
            await journal.check_new()  # a run refused for its id must not have run the approved calls first
        if status.approvals:
            # Cleared in the store before an approved call runs, or an answer goes out: a crash from here on
            # loses the approval or the answer instead of running its call twice.
            await journal.keep_approvals([])
    except RunError as refused:
        return refused
    status.clear_approvals()
    resumed = await _run_approved(run, order.assistant, resolution)
    asked_again: list[Pending] = []
    resumed += await _run_answered(run, order.assistant, answered, asked_again)
    # Calls of client tools the input does not answer are answered first, so the history stays valid.
    waiting = {p.call.id for p in asked_again}  # calls that asked again stay open
    dangling = answer_dangling_calls([*history, *resumed], request.messages)
    given = [*(m for m in dangling if m.get("tool_call_id") not in waiting), *request.messages]
    try:
        await journal.start(order.assistant.id, given)  # the input joins the transcript once stored
    except RunError as error:
        return error
    if asked_again:  # a call answered asks again: the run ends with the new questions
        return Answer(run.last_text, Outcome.INTERRUPT, interrupts=tuple(asked_again))
    window = window_history(history, order.assistant.history_max_messages)
    return await answer(run, order, [*window, *resumed, *given])


async def _drop_gone(run: Run, status: ThreadStatus, journal: RunJournal, answered: Answered) -> None:
    """Refuse a resume answering a handshake-era call no live server actor holds open any more (here, or in
    another process sharing the store).

    Its questions are dropped from the thread (the next run tells the model the call could not complete);
    the run ends ``interrupt_expired``.
    """

    with store_trouble_ends_the_run():
        gone = await gone_calls(answered, run.servers.reaches_parked)
    if not gone:
        return
    gone_ids = {p.call.id for p in gone}
    await journal.keep_approvals(status.drop_approvals(gone_ids))
    names = ", ".join(sorted({p.call.name for p in gone}))
    raise RunError(
        f"the call of {names} waiting for this answer is gone (its process ended, or its input_timeout passed); "
        "the tool could not complete",
        code=RunErrorCode.INTERRUPT_EXPIRED,
    )


async def _run_answered(
    run: Run, assistant: AssistantSpec, answered: Answered, asked_again: list[Pending]
) -> list[Message]:
    """Give each call its user's answers (made again, or in the actor holding it); their tool messages.

    A call that asks again adds its new questions to ``asked_again`` (and has no tool message yet).
    """
    messages: list[Message] = []
    calls = answered.by_call()
    if not calls:
        return messages
    catalog = await run.catalog(assistant, ())
    for answers in calls.values():
        first = answers[0][0]
        given = {first.call.id: call_answers(answers)}
        results = await run.dispatch([first.call], catalog, assistant.timeouts.turn, messages, answers=given)
        asked_again.extend(held_inputs(results, [first.call], run.resources.clock(), run.input_timeout))
    return messages


async def _run_approved(run: Run, assistant: AssistantSpec, resolution: Resolution) -> list[Message]:
    """Run the approved calls and tell the model about the others; their tool messages, in the transcript too."""
    messages: list[Message] = []
    if resolution.approved:
        catalog = await run.catalog(assistant, ())
        await run.dispatch(resolution.approved, catalog, assistant.timeouts.turn, messages)
    messages.extend(resolution.refused)
    run.transcript.extend(resolution.refused)
    return messages


async def answer(run: Run, order: RunOrder, conversation: list[Message]) -> Ending:
    """``Run.answer`` with every failure turned into a ``RunError`` (cancellation passes)."""
    failure: RunError | None = None
    try:
        return await run.answer(order.assistant, conversation, 0)
    except* RunError as group:
        failure = exception_leaves(group)[0]
    except* ModelError as group:
        failure = RunError(str(exception_leaves(group)[0]), code=RunErrorCode.MODEL_ERROR)
    except* Exception as group:
        error = exception_leaves(group)[0]
        logger.error("run %s failed", order.run_id, exc_info=error)
        failure = RunError(f"internal error: {type(error).__name__}: {error}", code=RunErrorCode.INTERNAL_ERROR)
    assert failure is not None
    return failure
