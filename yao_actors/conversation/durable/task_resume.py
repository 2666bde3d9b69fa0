"""Taking up a run whose process died while it waited on a task: another process goes on from the stored handle.

A run that a server answered with a task keeps the task's handle with its thread
(:mod:`~yao_actors.conversation.durable.task_keeping`), after the model's message and its tool calls are written
to the run's event log. When its process dies, the thread's lease expires, and the lease no longer closes that
run as ``interrupted`` (it has open tasks): :func:`serve_task_resumes`, in every process sharing the store,
finds it left running and unleased (twice in a row, as the sweep for dead runs does, so a process whose store was
briefly out of reach has time to take its lease back; at once on its first look, a restarted process's), and
has the conversation manager take it up: the same run id, on the thread's actor, under the thread's lease.

The run goes on where it stopped (:func:`continue_run`): its turn is rebuilt from its event log (the
assistant's text and tool calls, as the model gave them), each open task is polled to its end through
:meth:`~yao_actors.tools.tool_server.ToolServer.poll_task` on the server's connection of the handle's
principal, a call that had its result before the process died keeps it, and one that was neither is told it
could not complete. Each result is one ``TOOL_CALL_RESULT`` event (numbered on from the log; a tool with an
interface's ``ACTIVITY_SNAPSHOT`` after it, as in the first process) and one tool message; the whole turn joins the history in one write, and the model then answers as in any run. A client
that follows the run (``open_resume`` with its run id, on any process) sees those events and the run's one
terminal event.

What cannot be taken up is closed as ``interrupted``, as before tasks: a run whose log has no tool call for its
stored task, or whose history already holds the call's answer (the process died after writing the turn).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from yao_actors.conversation.interrupts.inputs import held_inputs
from yao_actors.conversation.loop.activity import emit_activity
from yao_actors.conversation.loop.answer import Answer
from yao_actors.conversation.loop.batch import Told
from yao_actors.errors import CorruptTaskRecord, ErrorKind, RunError, RunErrorCode, StoreUnavailable
from yao_actors.events import Outcome
from yao_actors.models.base import Completion, Message, ToolCall
from yao_actors.store import ConversationStore
from yao_actors.store.protocol import TaskRecords, ThreadLeases
from yao_actors.store.task_handle import TaskHandle
from yao_actors.tools.apps import interface_call, listed_interface
from yao_actors.tools.results import ToolCallResult, ToolOutcome
from yao_actors.tools.tool_server import CallOptions

if TYPE_CHECKING:
    from yao_actors.conversation.loop.run import Run

logger = logging.getLogger(__name__)

#: What a call of the rebuilt turn that had neither a task nor a result is told.
NOT_FINISHED = "the process running this call stopped before the call ended; it did not complete"

Adopt = Callable[[str, str], Awaitable[object]]
"""Has a run (``run id``, ``thread id``) taken up in this process (the conversation manager's ``adopt``)."""


@attrs.frozen
class PendingTurn:
    """The last model turn of a run, rebuilt from its events: the assistant's message and its calls, and the
    content of the results it already had (by call id)."""

    message: Message
    calls: tuple[ToolCall, ...]
    answered: Mapping[str, str]


def pending_turn(events: Sequence[Mapping[str, Any]]) -> PendingTurn | None:
    """The turn of the run's last model step (its text and tool calls), or ``None`` when it made no tool call."""
    starts = [i for i, event in enumerate(events) if event.get("type") == "STEP_STARTED"]
    step = events[starts[-1] :] if starts else events
    text: list[str] = []
    names: dict[str, str] = {}
    arguments: dict[str, list[str]] = {}
    answered: dict[str, str] = {}
    for event in step:
        kind = event.get("type")
        if kind == "TEXT_MESSAGE_CONTENT":
            text.append(str(event.get("delta", "")))
        elif kind == "TOOL_CALL_START":
            names[str(event["toolCallId"])] = str(event["toolCallName"])
            arguments.setdefault(str(event["toolCallId"]), [])
        elif kind == "TOOL_CALL_ARGS":
            arguments.setdefault(str(event["toolCallId"]), []).append(str(event.get("delta", "")))
        elif kind == "TOOL_CALL_RESULT":
            answered[str(event["toolCallId"])] = str(event.get("content", ""))
    if not names:
        return None
    calls = tuple(ToolCall(call_id, name, "".join(arguments[call_id])) for call_id, name in names.items())
    message = Completion("".join(text), calls).to_message()
    return PendingTurn(message, calls, answered)


def answered_in(history: Sequence[Message], call_ids: set[str]) -> bool:
    """Whether ``history`` already holds a tool message answering one of ``call_ids``."""
    return any(m.get("role") == "tool" and m.get("tool_call_id") in call_ids for m in history)


async def poll_result(run: Run, call: ToolCall, handle: TaskHandle) -> ToolCallResult:
    """Poll the stored task of ``call`` to its end (its status messages as the call's progress); its result."""

    async def progress(value: float, total: float | None, message: str | None) -> None:
        await run.events.tool_progress(call.id, value, total, message)

    await run.servers.bind([handle.server])  # a server connected per principal: the run's principal's view
    server = run.servers.get(handle.server)
    app = None
    if server is None:
        outcome = ToolOutcome(error=f"server {handle.server!r} is not configured here", kind=ErrorKind.TOOL_ERROR)
    else:
        try:
            # The call's watch: the run's deadline stands still while it waits on the task, as in the first process,
            # and its task_timeout bounds the wait whatever deadline the stored handle says.
            watch = run.task_watch(call) if run.task_watch is not None else None
            outcome = await server.poll_task(handle, CallOptions(progress=progress, tasks=watch))
        except trio.TooSlowError:
            outcome = ToolOutcome(error=f"the task of {handle.tool!r} did not finish in time", kind=ErrorKind.TIMEOUT)
        # A tool with an interface (MCP Apps): the result as the server sent it makes the same activity here.
        interface = listed_interface(await server.list_tools(), handle.tool)
        app = interface_call(interface, server.spec, handle.arguments, outcome.app_result)
    return ToolCallResult.of(call, handle.server, handle.tool, outcome, app=app)


def not_finished(call: ToolCall) -> ToolCallResult:
    """The result of a call of the turn whose process died before it ended, without a task to go on from."""
    return ToolCallResult(call.id, call.name, "", "", call.arguments, error=NOT_FINISHED, kind=ErrorKind.TOOL_ERROR)


def cannot_continue(run_id: str, why: str) -> RunError:
    """The run is closed as interrupted, as a run whose process died always was."""
    return RunError(f"run {run_id!r} cannot be taken up: {why}", code=RunErrorCode.INTERRUPTED)


async def open_tasks(store: ConversationStore, run_id: str) -> list[TaskHandle]:
    """The run's stored open tasks (``[]`` in a store that keeps none); a record that does not read back raises
    :class:`~yao_actors.errors.CorruptTaskRecord` (:func:`readable_tasks` sets it aside)."""
    records = store.tasks()
    return [] if records is None else await records.for_run(run_id)


async def readable_tasks(store: ConversationStore, run_id: str) -> tuple[list[TaskHandle], RunError | None]:
    """The run's stored open tasks that read back, each record that does not set aside: logged (one line naming
    its thread, the run and its task) and removed from the store; with the ``RunError`` closing the run as
    interrupted that says so (``None`` when every record read back)."""
    unreadable: list[CorruptTaskRecord] = []
    for _ in range(UNREADABLE_MOST):
        try:
            return await open_tasks(store, run_id), _unreadable(run_id, unreadable)
        except CorruptTaskRecord as bad:
            logger.warning(
                "run %s of thread %s: its stored task %s cannot be read, set aside: %s",
                run_id,
                bad.thread_id,
                bad.task_id,
                bad.why,
            )
            unreadable.append(bad)
            records = store.tasks()
            if records is None or not await records.remove(bad.thread_id, bad.task_id):
                break  # not removed (another process did, or it is not where it says): the run closes anyway
    return [], _unreadable(run_id, unreadable)


#: The most unreadable task records of one run set aside in one look.
UNREADABLE_MOST: Final = 16


def _unreadable(run_id: str, unreadable: Sequence[CorruptTaskRecord]) -> RunError | None:
    """The ``RunError`` (``interrupted``) of a run some of whose task records did not read back."""
    if not unreadable:
        return None
    said = "; ".join(f"task {bad.task_id!r}: {bad.why}" for bad in unreadable)
    return cannot_continue(run_id, f"its stored task record could not be read ({said})")


async def take_up_turn(
    run: Run, run_id: str, history: Sequence[Message], events: Sequence[Mapping[str, Any]], store: ConversationStore
) -> list[Message] | RunError | Answer:
    """Finish the turn the run stopped in (its ``events`` so far): its open tasks polled to their end, each call's
    ``TOOL_CALL_RESULT`` emitted and its tool message in the run's transcript, the whole turn queued for the store;
    the turn's messages for the model. A run that cannot be taken up gets the ``RunError`` it ends with; one whose
    task now asks the user, the ``Answer`` ending it with that interrupt."""
    found, unreadable = await readable_tasks(store, run_id)
    if unreadable is not None:
        return unreadable
    handles = {handle.call_id: handle for handle in found}
    turn = pending_turn(events)
    if not handles:
        return cannot_continue(run_id, "it has no open task")
    if turn is None or not handles.keys() & {call.id for call in turn.calls}:
        return cannot_continue(run_id, "its event log holds no tool call of its open tasks")
    if answered_in(history, {call.id for call in turn.calls}):
        return cannot_continue(run_id, "its history holds the answers of its tool calls already")
    messages: list[Message] = [turn.message]
    run.transcript.append(turn.message)
    told: list[Told] = []
    for call in turn.calls:
        if call.id in turn.answered:  # it had its result before the process died: the model gets that one
            had = ToolCallResult(call.id, call.name, "", "", call.arguments, result=turn.answered[call.id])
            told.append(Told(had, turn.answered[call.id]))
            continue
        handle = handles.get(call.id)
        result = not_finished(call) if handle is None else await poll_result(run, call, handle)
        if result.kind is ErrorKind.INPUT_REQUIRED:  # the task waits for the user: no result yet
            told.append(Told(result))
            continue
        media_bytes = run.resources.media_bytes
        sent = await run.events.tool_call_result(run.new_message_id(), result, media_bytes=media_bytes)
        told.append(Told(result, sent["content"]))
        if result.app is not None:  # right after its TOOL_CALL_RESULT, as in the first process
            await emit_activity(run.events, run.new_message_id(), result.app, media_bytes)
    run.record(told, messages)
    run.checkpoint(True)
    asked = held_inputs([each.result for each in told], turn.calls, run.resources.clock(), run.input_timeout)
    if asked:  # the run ends with the task's questions, as a run that was not taken up does (Run.execute)
        return Answer(run.last_text, Outcome.INTERRUPT, interrupts=tuple(asked))
    return messages


async def serve_task_resumes(
    leases: ThreadLeases,
    records: TaskRecords,
    owner: str,
    interval: float,
    adopt: Adopt,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Take up, every ``interval`` seconds, the runs a dead process left waiting on a stored task (see the
    module docstring); ``owner`` is this process's store token (its own runs are alive)."""
    suspects: set[str] | None = None
    task_status.started()
    while True:
        try:
            found = await leases.unleased_running_runs(owner)
        except StoreUnavailable as error:
            logger.warning("the look for runs waiting on tasks could not reach the store: %s", error)
        else:
            due = [(r, t) for r, t in found if suspects is None or r in suspects]
            suspects = {r for r, _ in found}
            for run_id, thread_id in due:
                await _take_up(records, adopt, run_id, thread_id)
        await trio.sleep(interval)


async def _take_up(records: TaskRecords, adopt: Adopt, run_id: str, thread_id: str) -> None:
    """Have run ``run_id`` taken up if it waits on a stored task. What goes wrong is logged and ends this run's
    look only: a task record that does not read back has the run taken up all the same (the taken-up run sets
    the record aside and closes as ``interrupted`` saying why), nothing stops the look for the other runs."""
    try:
        try:
            waiting = bool(await records.for_run(run_id))
        except CorruptTaskRecord as bad:
            logger.warning(
                "run %s of thread %s: its stored task %s cannot be read (%s): taking it up to close it",
                run_id,
                bad.thread_id,
                bad.task_id,
                bad.why,
            )
            waiting = True
        if waiting:
            logger.warning("run %s waits on a task its process left: taking it up here", run_id)
            await adopt(run_id, thread_id)
    except StoreUnavailable as error:
        logger.warning("run %s of thread %s could not be looked at: %s", run_id, thread_id, error)
    except Exception:  # a run that cannot be taken up must not stop the runtime, nor the others' taking up
        logger.exception("run %s of thread %s could not be taken up", run_id, thread_id)
