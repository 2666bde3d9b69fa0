"""The conversation actor and the run (DESIGN §2 and §4.4).

One actor per thread owns the thread's message history and executes that
thread's runs one at a time, in the order they were submitted; runs of other
threads go on concurrently. A run goes::

    create hook ─▶ request (prompts, samples, history, input; tools) ─▶ first model call
      ─▶ argument-retry block (≤ 3 executions) ─▶ next hook │ tool loop (≤ max_turn) │ standard response
      ─▶ fallback assistant when the loop fails ─▶ exactly one RUN_FINISHED or RUN_ERROR

Deadlines are cancel scopes set here, by the caller of each piece: the run's
(``timeouts.run``), each model call's (``timeouts.model``), and each tool batch's
(``timeouts.turn``, handed to dispatch). Cancelling a run (the caller left, the
consumer of its events is gone, or its deadline fired) cancels every model and
tool call under it; every tool call without a result then gets a ``cancelled``
one, so the history the thread keeps stays valid (every ``tool_calls`` entry is
answered by a ``role: tool`` message).

:class:`ConversationManager` is what the runtime owns: it keeps the actors by
thread id in the runtime's nursery and offers :meth:`~ConversationManager.open_run`
(events as a bounded receive channel) and :meth:`~ConversationManager.run`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import attrs
import trio

from yao_actors.catalog import Catalog, CatalogCache
from yao_actors.config import AssistantSpec, ServerRef
from yao_actors.dispatch import (
    CallFinished,
    CallProgress,
    DispatchEvent,
    SequentialRetry,
    ToolServer,
    execute_tool_calls,
    failed_result,
)
from yao_actors.errors import ConfigError, ErrorKind, ModelError, ModelTimeout, RunError
from yao_actors.events import EventDict, Outcome, RunEvents
from yao_actors.fallback import (
    FALLBACK_ASSISTANT_ID,
    FALLBACK_DESCRIPTION,
    TOOL_RETRY_PROMPT,
    build_fallback_brief,
    fallback_messages,
)
from yao_actors.hooks import HookContext, NextResult, resolve_hooks, run_create, run_next
from yao_actors.models.base import (
    Completion,
    Delta,
    Message,
    Model,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from yao_actors.results import ToolCallResult, tool_message_content

logger = logging.getLogger(__name__)

MAX_EXECUTIONS = 3
"""Executions of one batch of tool calls in the argument-retry block (the seed's ``maxToolRetries``)."""

EVENT_BUFFER = 16
"""Events a run may get ahead of its consumer before it waits."""

RUN_QUEUE = 8
"""Runs that may wait for their turn on one thread before submitting waits too."""

CLEANUP_GRACE = 5.0
"""Seconds a cancelled run has to record its results and emit its terminal event."""

MAX_THREADS = 1000
"""Threads a runtime keeps; past that the least recently used idle thread is forgotten."""

MAX_DELEGATION_DEPTH = 4

MessagesInput = str | Sequence[Message]
"""A run's input: one user message as text, or a list of chat messages."""


def new_id() -> str:
    return uuid.uuid4().hex


def input_messages(messages: MessagesInput) -> tuple[Message, ...]:
    """A run's input as chat messages (text is one user message)."""
    if isinstance(messages, str):
        return ({"role": "user", "content": messages},)
    return tuple(dict(m) for m in messages)


@attrs.frozen
class RunResult:
    """What a run produced.

    ``text`` is the final answer (the fallback's when it answered);
    ``tool_results`` every tool call of the run in order; ``usage`` summed over
    every model call, fallback included; ``outcome`` how it ended; ``data`` what
    a ``next`` hook returned; ``error`` and ``code`` those of a ``RUN_ERROR``;
    ``note`` why the fallback was used; ``events`` the run's events when they
    were collected (:meth:`ConversationManager.run`).
    """

    run_id: str
    thread_id: str
    text: str
    tool_results: tuple[ToolCallResult, ...]
    usage: Usage
    outcome: Outcome
    data: Any = None
    note: str | None = None
    error: str | None = None
    code: str | None = None
    events: tuple[EventDict, ...] = ()


@attrs.frozen
class _Answer:
    """How ``_Run.answer`` ended: the text, the outcome, and the message the history gets for it."""

    text: str
    outcome: Outcome
    message: Message | None = None
    data: Any = None
    note: str | None = None


class _Cancelled:
    """The run was cancelled before it ended by itself."""


_CANCELLED = _Cancelled()
_Ending = _Answer | RunError | _Cancelled


# --------------------------------------------------------------------------- model stream → events


@attrs.define(eq=False)
class _CallStream:
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    started: bool = False
    ended: bool = False


@attrs.define(eq=False)
class _DeltaRelay:
    """Turns one model call's deltas into TEXT_MESSAGE_*, REASONING_MESSAGE_* and TOOL_CALL_* events.

    ``finish`` fills in what a model did not stream (a non-streaming model
    still produces the same events) and closes everything still open.
    """

    events: RunEvents
    new_message_id: Callable[[], str]
    text_id: str | None = None
    reasoning_id: str | None = None
    calls: dict[int, _CallStream] = attrs.field(factory=dict)

    async def on_delta(self, delta: Delta) -> None:
        if isinstance(delta, TextDelta):
            await self._text(delta.text)
        elif isinstance(delta, ReasoningDelta):
            if self.reasoning_id is None:
                message_id = self.new_message_id()
                await self.events.reasoning_start(message_id)
                self.reasoning_id = message_id
            await self.events.reasoning_content(self.reasoning_id, delta.text)
        elif isinstance(delta, ToolCallDelta):
            await self._tool_call(delta)

    async def _text(self, text: str) -> None:
        if self.text_id is None:
            message_id = self.new_message_id()
            await self.events.text_start(message_id)
            self.text_id = message_id
        await self.events.text_content(self.text_id, text)

    async def _tool_call(self, delta: ToolCallDelta) -> None:
        stream = self.calls.setdefault(delta.index, _CallStream())
        stream.id = stream.id or delta.id
        stream.name = stream.name or delta.name
        stream.arguments += delta.arguments
        if not stream.started and stream.id and stream.name:
            await self.events.tool_call_start(stream.id, stream.name, parent_message_id=self.text_id)
            stream.started = True
        if stream.started and stream.arguments and stream.id:
            arguments, stream.arguments = stream.arguments, ""
            await self.events.tool_call_args(stream.id, arguments)

    async def finish(self, completion: Completion) -> None:
        if self.text_id is None and completion.text:
            await self._text(completion.text)
        streamed = {stream.id for stream in self.calls.values() if stream.started}
        for call in completion.tool_calls:
            if call.id not in streamed:
                index = len(self.calls)
                await self._tool_call(ToolCallDelta(index=index, id=call.id, name=call.name, arguments=call.arguments))
        await self.close()

    async def close(self) -> None:
        """End every message and tool call still open."""
        if self.reasoning_id is not None:
            await self.events.reasoning_end(self.reasoning_id)
            self.reasoning_id = None
        if self.text_id is not None:
            await self.events.text_end(self.text_id)
            self.text_id = None
        for stream in self.calls.values():
            if stream.started and not stream.ended and stream.id:
                await self.events.tool_call_end(stream.id)
                stream.ended = True


# --------------------------------------------------------------------------- the run


@attrs.define(eq=False)
class _Batch:
    """A batch of tool calls in flight: the results it has so far, and which of them were announced (by position)."""

    calls: tuple[ToolCall, ...]
    catalog: Catalog
    done: dict[int, ToolCallResult] = attrs.field(factory=dict)
    announced: set[int] = attrs.field(factory=set)


@attrs.define(eq=False)
class _Run:
    """The state and steps of one run; everything it learns is kept so a cancelled run can still be recorded."""

    manager: ConversationManager
    events: RunEvents
    history: tuple[Message, ...]
    transcript: list[Message] = attrs.field(factory=list)
    results: list[ToolCallResult] = attrs.field(factory=list)
    usage: Usage = attrs.field(factory=Usage)
    last_text: str = ""
    batch: _Batch | None = None
    relay: _DeltaRelay | None = None
    step: str | None = None
    subagents: list[str] = attrs.field(factory=list)
    counter: int = 0

    def new_message_id(self) -> str:
        self.counter += 1
        return f"{self.events.run_id}.{self.counter}"

    # ------------------------------------------------------------------ the loop (DESIGN §4.4)

    async def answer(self, assistant: AssistantSpec, conversation: list[Message], depth: int) -> _Answer:
        """Steps 1–6 for ``assistant`` over ``conversation`` (history and input, no system prompts)."""
        hooks = resolve_hooks(assistant.hooks)
        ctx = HookContext(assistant.id, self.events.thread_id, self.events.run_id)
        created = await run_create(hooks, ctx, conversation)
        if created.messages:
            conversation = [*conversation, *created.messages]
            if depth == 0:
                self.transcript.extend(created.messages)
        if created.delegate is not None:
            return await self.delegate(created.delegate, conversation, depth)
        catalog = await self.catalog(assistant, created.servers or ())
        model = self.manager.model(assistant.model)
        messages = build_request(assistant, catalog, conversation)
        completion = await self.call_model(assistant, model, messages, catalog.tools, "model")
        if not completion.tool_calls:
            return _Answer(completion.text, Outcome.ANSWERED, completion.to_message())
        try:
            completion = await self.retry_block(assistant, model, messages, catalog, completion)
            if not completion.tool_calls:
                return _Answer(completion.text, Outcome.ANSWERED, completion.to_message())
            if hooks.next is not None:
                payload = {"messages": conversation, "completion": completion, "tool_results": list(self.results)}
                return await self.next_branch(await run_next(hooks, ctx, payload), completion, conversation, depth)
            if not assistant.tool_loop:
                return _Answer(completion.text, Outcome.ANSWERED)
            return await self.tool_loop(assistant, model, messages, catalog)
        except ModelError as error:
            return await self.fallback(assistant, conversation, f"a model call failed: {error}")
        except _MaxTurns as reached:
            return await self.fallback(assistant, conversation, str(reached))

    async def retry_block(
        self,
        assistant: AssistantSpec,
        model: Model,
        messages: list[Message],
        catalog: Catalog,
        completion: Completion,
    ) -> Completion:
        """Execute the calls; re-ask the model to fix retryable failures, at most 3 executions in all.

        Returns the last completion: its calls are executed, or it has none
        (the model answered the retry in plain text, which is accepted).
        Non-retryable failures are not retried: the model gets them as
        ``Error: ...`` results like any other.
        """
        for execution in range(1, MAX_EXECUTIONS + 1):
            results = await self.execute(assistant, messages, completion, catalog)
            failed = [r.call_id for r in results if not r.ok and r.retryable]
            if not failed or execution == MAX_EXECUTIONS:
                break
            await self.events.tool_retry(execution, failed)
            retry_request = [*messages, {"role": "system", "content": TOOL_RETRY_PROMPT}]
            completion = await self.call_model(assistant, model, retry_request, catalog.tools, f"retry {execution}")
            if not completion.tool_calls:
                break
        return completion

    async def tool_loop(
        self, assistant: AssistantSpec, model: Model, messages: list[Message], catalog: Catalog
    ) -> _Answer:
        """Up to ``max_turn`` model calls, executing each turn's calls, until the model asks for none."""
        for turn in range(1, assistant.max_turn + 1):
            completion = await self.call_model(assistant, model, messages, catalog.tools, f"turn {turn}")
            if not completion.tool_calls:
                return _Answer(completion.text, Outcome.ANSWERED, completion.to_message())
            await self.execute(assistant, messages, completion, catalog)
        raise _MaxTurns(f"tool loop reached max turns ({assistant.max_turn})")

    async def next_branch(
        self, decided: NextResult | None, completion: Completion, conversation: list[Message], depth: int
    ) -> _Answer:
        """What the ``next`` hook decided: the standard response, data, or a delegation."""
        if decided is None:
            return _Answer(completion.text, Outcome.ANSWERED)
        if decided.delegate is not None:
            messages = conversation if decided.delegate.messages is None else list(decided.delegate.messages)
            return await self.delegate(decided.delegate.assistant_id, messages, depth)
        return _Answer(completion.text, Outcome.DATA, data=decided.data)

    async def delegate(self, assistant_id: str, conversation: list[Message], depth: int) -> _Answer:
        """Run another assistant on the conversation, as a subagent of this run."""
        if depth >= MAX_DELEGATION_DEPTH:
            raise RunError(f"delegation deeper than {MAX_DELEGATION_DEPTH} assistants", code="hook_error")
        target = self.manager.assistant(assistant_id)
        subagent_id = await self.subagent_started(target.id)
        with self.events.attributed_to(subagent_id):
            answer = await self.answer(target, conversation, depth + 1)
        await self.events.subagent_finished(subagent_id, {"text": answer.text, "outcome": answer.outcome.value})
        self.subagents.remove(subagent_id)
        return answer

    async def fallback(self, assistant: AssistantSpec, conversation: list[Message], reason: str) -> _Answer:
        """Step 6: the fallback assistant synthesises an answer from everything the run has."""
        logger.warning("run %s: %s; delegating to %s", self.events.run_id, reason, FALLBACK_ASSISTANT_ID)
        brief = build_fallback_brief(assistant.prompt, conversation, self.results)
        subagent_id = await self.subagent_started(FALLBACK_ASSISTANT_ID, FALLBACK_DESCRIPTION)
        try:
            with self.events.attributed_to(subagent_id):
                model = self.manager.model(assistant.fallback_model or assistant.model)
                completion = await self.call_model(assistant, model, fallback_messages(brief), [], "fallback")
        except (ModelError, RunError) as error:
            code = error.code if isinstance(error, RunError) else "model_error"
            await self.events.subagent_error(subagent_id, str(error), code=code)
            self.subagents.remove(subagent_id)
            note = f"{reason}; the fallback assistant failed too ({error}): finished with what the run has"
            return _Answer(self.last_text, Outcome.DEGRADED, note=note)
        await self.events.subagent_finished(subagent_id, {"text": completion.text})
        self.subagents.remove(subagent_id)
        return _Answer(
            completion.text, Outcome.FALLBACK, {"role": "assistant", "content": completion.text}, note=reason
        )

    # ------------------------------------------------------------------ the pieces

    async def subagent_started(self, name: str, description: str | None = None) -> str:
        """Announce a subagent invocation; it stays open (``self.subagents``) until it finishes."""
        subagent_id = self.new_message_id()
        await self.events.subagent_started(subagent_id, name, description=description)
        self.subagents.append(subagent_id)
        return subagent_id

    async def catalog(self, assistant: AssistantSpec, override: Sequence[ServerRef]) -> Catalog:
        try:
            catalog = await self.manager.catalogs.get(assistant, self.manager.servers, override=override)
        except ConfigError as error:
            raise RunError(str(error), code="config_error") from error
        for warning in catalog.warnings:
            logger.warning("assistant %s: %s", assistant.id, warning)
        return catalog

    async def call_model(
        self,
        assistant: AssistantSpec,
        model: Model,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]],
        step: str,
    ) -> Completion:
        """One streamed model call under the model deadline, as one step of events."""
        self.relay = _DeltaRelay(self.events, self.new_message_id)
        await self.events.step_started(step)
        self.step = step
        try:
            with trio.fail_after(assistant.timeouts.model):
                completion = await model.complete(messages, tools, on_delta=self.relay.on_delta)
        except trio.TooSlowError as error:
            await self.end_step()
            raise ModelTimeout(f"model {model.name!r} did not answer within {assistant.timeouts.model} s") from error
        except ModelError:
            await self.end_step()
            raise
        await self.end_step(completion)
        self.last_text = completion.text or self.last_text
        if completion.usage is not None:
            self.usage += completion.usage
            await self.events.usage(completion.usage, model=model.name)
        return completion

    async def end_step(self, completion: Completion | None = None) -> None:
        """Close the model call's open messages (filling in what was not streamed) and its step."""
        if self.relay is not None:
            await (self.relay.close() if completion is None else self.relay.finish(completion))
            self.relay = None
        if self.step is not None:
            await self.events.step_finished(self.step)
            self.step = None

    async def execute(
        self, assistant: AssistantSpec, messages: list[Message], completion: Completion, catalog: Catalog
    ) -> list[ToolCallResult]:
        """Run a completion's tool calls; append its assistant message and one tool message per call."""
        message = completion.to_message()
        messages.append(message)
        self.transcript.append(message)
        self.batch = _Batch(completion.tool_calls, catalog)
        results = await execute_tool_calls(
            completion.tool_calls,
            catalog,
            self.manager.servers,
            batch_timeout=assistant.timeouts.turn,
            on_event=self.on_dispatch,
        )
        self.batch = None
        self.record(results, messages)
        return results

    async def on_dispatch(self, event: DispatchEvent) -> None:
        if isinstance(event, CallFinished):
            batch = self.batch
            if batch is not None:
                batch.done[event.index] = event.result
            await self.events.tool_call_result(self.new_message_id(), event.result)
            if batch is not None:
                batch.announced.add(event.index)
            if event.result.kind is ErrorKind.SERVER_UNAVAILABLE and event.result.server:
                await self.events.server_status(event.result.server, "unavailable", event.result.error)
        elif isinstance(event, CallProgress):
            await self.events.tool_progress(event.call.id, event.progress, event.total, event.message)
        elif isinstance(event, SequentialRetry):
            await self.events.sequential_retry(event.call_ids)

    def record(self, results: Sequence[ToolCallResult], messages: list[Message] | None = None) -> None:
        """Keep a batch's results and answer each of its calls with a tool message."""
        self.results.extend(results)
        for result in results:
            tool_message = {"role": "tool", "tool_call_id": result.call_id, "content": tool_message_content(result)}
            self.transcript.append(tool_message)
            if messages is not None:
                messages.append(tool_message)

    def settle(self) -> list[ToolCallResult]:
        """After a cancellation or failure: give every unanswered call of the batch a ``cancelled`` result.

        Returns the batch's results whose ``TOOL_CALL_RESULT`` is still to be emitted.
        """
        if self.batch is None:
            return []
        batch, self.batch = self.batch, None
        results = [batch.done.get(i) or _cancelled_result(call, batch.catalog) for i, call in enumerate(batch.calls)]
        self.record(results)
        return [result for index, result in enumerate(results) if index not in batch.announced]

    async def announce_settled(self, unannounced: Sequence[ToolCallResult]) -> None:
        """Close what the run left open (messages, step, subagents) and emit the results :meth:`settle` made."""
        await self.end_step()
        for result in unannounced:
            await self.events.tool_call_result(self.new_message_id(), result)
        while self.subagents:
            message = "the run ended before the subagent finished"
            await self.events.subagent_error(self.subagents.pop(), message, code="run_ended")


class _MaxTurns(Exception):
    """The tool loop used all its turns and the model still asked for tools."""


def _cancelled_result(call: ToolCall, catalog: Catalog) -> ToolCallResult:
    message = "the run was cancelled before the call finished"
    return failed_result(call, catalog.resolve(call.name), message, ErrorKind.CANCELLED)


def build_request(assistant: AssistantSpec, catalog: Catalog, conversation: Sequence[Message]) -> list[Message]:
    """Step 1: the assistant's prompts, the samples message, then history and input (seed order)."""
    messages: list[Message] = [{"role": "system", "content": prompt} for prompt in assistant.prompt if prompt]
    if catalog.samples_message:
        messages.append({"role": "system", "content": catalog.samples_message})
    messages.extend(conversation)
    return messages


# --------------------------------------------------------------------------- the actor


@attrs.define(eq=False)
class _RunOrder:
    """A run submitted to a thread's actor; the caller keeps it to cancel the run and read its result.

    ``events`` is the consumer's channel (:meth:`ConversationManager.open_run`);
    without one the events are kept in ``collected`` (:meth:`ConversationManager.run`,
    which returns them all at the end: a channel and a task reading it would
    only cost a trip through the scheduler per event).
    """

    assistant: AssistantSpec
    messages: tuple[Message, ...]
    run_id: str
    thread_id: str
    events: trio.MemorySendChannel[EventDict] | None
    collected: list[EventDict] = attrs.field(factory=list)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    started: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)
    result: RunResult | None = None
    late_events: list[EventDict] = attrs.field(factory=list)

    async def deliver(self, event: EventDict) -> None:
        """Send an event to the consumer; a consumer that is gone cancels the run."""
        if self.events is None:
            self.collected.append(event)
            return
        try:
            await self.events.send(event)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.scope.cancel()

    def end(self) -> None:
        """The run is over: no more events; whoever waits for it may go on."""
        if self.events is not None:
            self.events.close()
        self.done.set()


@attrs.define(eq=False)
class ConversationHandle:
    """A thread's conversation actor: submit runs to it; it owns the thread's history."""

    thread_id: str
    _mailbox: trio.MemorySendChannel[_RunOrder]
    _history: list[Message] = attrs.field(factory=list)
    owner: str | None = None
    """The principal that created the thread; only its runs may use it."""
    pending: int = 0
    """Runs submitted and not yet finished."""

    @property
    def history(self) -> tuple[Message, ...]:
        """A copy of the thread's messages so far (input, assistant and tool messages of finished runs)."""
        return tuple(self._history)

    async def submit(self, order: _RunOrder) -> None:
        self.pending += 1
        try:
            await self._mailbox.send(order)
        except BaseException:
            self.pending -= 1
            raise

    def close(self) -> None:
        """Take no more runs: the actor ends once the runs already submitted are done."""
        self._mailbox.close()

    async def execute(self, manager: ConversationManager, order: _RunOrder) -> None:
        """Execute one run; it always ends with exactly one terminal event (DESIGN invariant 6)."""
        order.started.set()
        run = _Run(manager, RunEvents(order.run_id, order.thread_id, order.deliver), self.history)
        ending: _Ending = _CANCELLED
        try:
            with order.scope, trio.move_on_after(order.assistant.timeouts.run) as deadline:
                await run.events.run_started()
                run.transcript.extend(order.messages)
                ending = await _answer(run, order, [*run.history, *order.messages])
            if deadline.cancelled_caught:
                timeout = order.assistant.timeouts.run
                ending = RunError(f"the run deadline of {timeout:g} s expired", code="run_timeout")
        finally:
            with trio.CancelScope(shield=True):
                unannounced = run.settle()
                order.result = _conclude(run, order, ending)
                self._history.extend(run.transcript)
                with trio.move_on_after(CLEANUP_GRACE):
                    await _announce(run, order.result, unannounced)
                if not run.events.finished:
                    # The consumer did not drain its channel in time: the rest of the close-out goes
                    # past the channel, and the stream hands it over after the last buffered event.
                    order.late_events = await _close_out_late(run, order.result, unannounced)
                order.end()


async def serve_conversation(
    handle: ConversationHandle,
    mailbox: trio.MemoryReceiveChannel[_RunOrder],
    manager: ConversationManager,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The actor: execute the thread's runs one at a time until the mailbox closes or the task is cancelled."""
    task_status.started()
    async with mailbox:
        async for order in mailbox:
            try:
                await handle.execute(manager, order)
            finally:
                handle.pending -= 1


async def _answer(run: _Run, order: _RunOrder, conversation: list[Message]) -> _Ending:
    """``_Run.answer`` with every failure turned into a ``RunError`` (cancellation passes)."""
    failure: RunError | None = None
    try:
        return await run.answer(order.assistant, conversation, 0)
    except* RunError as group:
        failure = _first(group, RunError)
    except* ModelError as group:
        failure = RunError(str(_first(group, ModelError)), code="model_error")
    except* Exception as group:
        error = _first(group, Exception)
        logger.error("run %s failed", order.run_id, exc_info=error)
        failure = RunError(f"internal error: {type(error).__name__}: {error}", code="internal_error")
    assert failure is not None
    return failure


E = TypeVar("E", bound=BaseException)


def _first(group: BaseExceptionGroup[E], kind: type[E]) -> E:
    """The first leaf exception of an exception group."""
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    assert isinstance(leaf, kind)
    return leaf


def _conclude(run: _Run, order: _RunOrder, ending: _Ending) -> RunResult:
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
    if isinstance(ending, _Answer):
        if ending.message is not None:
            run.transcript.append(ending.message)
        return attrs.evolve(result, text=ending.text, outcome=ending.outcome, data=ending.data, note=ending.note)
    return result


async def _announce(run: _Run, result: RunResult, unannounced: Sequence[ToolCallResult]) -> None:
    """The last events of a run: what was left open, then exactly one terminal event."""
    events = run.events
    if events.seq == 0:
        await events.run_started()
    await run.announce_settled(unannounced)
    if result.outcome is Outcome.ERROR:
        await events.run_error(result.error or "", code=result.code or "run_error", usage=run.usage)
    else:
        cancelled_run = result.outcome is Outcome.CANCELLED
        await events.run_finished(_finished_value(result), cancelled=cancelled_run, usage=run.usage)


async def _close_out_late(run: _Run, result: RunResult, unannounced: Sequence[ToolCallResult]) -> list[EventDict]:
    """The close-out events not delivered yet, numbered on from the last one sent, built without sending them."""
    captured: list[EventDict] = []

    async def capture(event: EventDict) -> None:
        captured.append(event)

    run.events.redirect(capture)
    await _announce(run, result, unannounced)
    return captured


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


# --------------------------------------------------------------------------- the manager


V = TypeVar("V")


def _lookup(table: Mapping[str, V], key: str, what: str) -> V:
    """``table[key]``, or a ``RunError`` (code ``unknown_<what>``) naming what is known."""
    value = table.get(key)
    if value is None:
        known = ", ".join(sorted(table)) or "none"
        raise RunError(f"unknown {what} {key!r} (known: {known})", code=f"unknown_{what}")
    return value


class RunStream(trio.abc.ReceiveChannel[EventDict]):
    """The events of one run, as a receive channel; also the run's ids, result and cancel."""

    def __init__(self, order: _RunOrder, receive: trio.MemoryReceiveChannel[EventDict]) -> None:
        self._order = order
        self._receive = receive

    @property
    def run_id(self) -> str:
        return self._order.run_id

    @property
    def thread_id(self) -> str:
        return self._order.thread_id

    @property
    def result(self) -> RunResult | None:
        """The run's result, once it has ended."""
        return self._order.result

    def cancel(self) -> None:
        """Cancel the run; it still ends with its terminal event (``RUN_FINISHED``, outcome ``cancelled``)."""
        self._order.scope.cancel()

    async def receive(self) -> EventDict:
        try:
            return await self._receive.receive()
        except trio.EndOfChannel:
            # A consumer too slow for the run's close-out still gets it, and its one terminal event.
            if not self._order.late_events:
                raise
            return self._order.late_events.pop(0)

    async def aclose(self) -> None:
        await self._receive.aclose()


@attrs.define(eq=False)
class ConversationManager:
    """The conversation actors of a runtime, by thread id, and the way to start runs on them.

    ``assistants``, ``servers`` and ``models`` are what runs use (servers by id,
    models by id); ``nursery`` is where the actors live (the runtime's).
    """

    assistants: Mapping[str, AssistantSpec]
    servers: Mapping[str, ToolServer]
    models: Mapping[str, Model]
    nursery: trio.Nursery
    catalogs: CatalogCache = attrs.field(factory=CatalogCache)
    max_threads: int = MAX_THREADS
    _threads: dict[str, ConversationHandle] = attrs.field(factory=dict, init=False)

    def assistant(self, ref: str | AssistantSpec) -> AssistantSpec:
        """An assistant by id (or the spec itself); ``RunError`` code ``unknown_assistant`` if there is none."""
        if isinstance(ref, AssistantSpec):
            return ref
        return _lookup(self.assistants, ref, "assistant")

    def model(self, model_id: str) -> Model:
        """A model by id; ``RunError`` code ``unknown_model`` if there is none."""
        return _lookup(self.models, model_id, "model")

    def owned_thread(self, thread_id: str, principal: str | None) -> ConversationHandle:
        """The actor of ``thread_id`` for a run of ``principal``; a new thread becomes that principal's.

        Another principal's thread is ``RunError`` code ``unknown_thread``, exactly as if it did not exist,
        so its id reveals nothing.
        """
        existing = self._threads.get(thread_id)
        if existing is not None and existing.owner != principal:
            raise RunError(f"unknown thread {thread_id!r}", code="unknown_thread")
        handle = self.thread(thread_id)
        if existing is None:
            handle.owner = principal
        return handle

    def thread(self, thread_id: str) -> ConversationHandle:
        """The actor of ``thread_id``, started on first use.

        At most ``max_threads`` threads are kept: a new one forgets the least
        recently used thread that has no run in progress or waiting, so the
        actors and histories of a long-running service stay bounded.
        """
        handle = self._threads.pop(thread_id, None)
        if handle is None:
            if len(self._threads) >= self.max_threads:
                self._forget_an_idle_thread()
            send, receive = trio.open_memory_channel[_RunOrder](RUN_QUEUE)
            handle = ConversationHandle(thread_id, send)
            self.nursery.start_soon(serve_conversation, handle, receive, self)
        self._threads[thread_id] = handle  # most recently used last
        return handle

    def _forget_an_idle_thread(self) -> None:
        for thread_id, handle in self._threads.items():
            if handle.pending == 0:
                self.close_thread(thread_id)
                return

    def close_thread(self, thread_id: str) -> None:
        """Forget a thread: its actor finishes the runs already submitted and ends; its history is dropped."""
        handle = self._threads.pop(thread_id, None)
        if handle is not None:
            handle.close()

    def history(self, thread_id: str) -> tuple[Message, ...]:
        """The messages a thread has kept so far (empty for an unknown thread)."""
        handle = self._threads.get(thread_id)
        return () if handle is None else handle.history

    @asynccontextmanager
    async def open_run(
        self,
        assistant: str | AssistantSpec,
        messages: MessagesInput,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        principal: str | None = None,
    ) -> AsyncIterator[RunStream]:
        """Start a run and yield its events; leaving the block early cancels the run.

        ``thread_id=None`` starts a new thread. The run waits for the runs
        submitted before it on the same thread. An unknown assistant raises
        ``RunError`` (code ``unknown_assistant``) before any event. On exit the
        run is over: its history is recorded and ``stream.result`` is set. A thread belongs to the
        ``principal`` that created it; another principal's run on it raises ``RunError`` (``unknown_thread``).
        """
        spec = self.assistant(assistant)
        order_events, receive = trio.open_memory_channel[EventDict](EVENT_BUFFER)
        order = _RunOrder(spec, input_messages(messages), run_id or new_id(), thread_id or new_id(), order_events)
        try:
            with receive:
                await self.owned_thread(order.thread_id, principal).submit(order)
                yield RunStream(order, receive)
        finally:
            await _wait_out(order)

    async def run(
        self,
        assistant: str | AssistantSpec,
        messages: MessagesInput,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        principal: str | None = None,
    ) -> RunResult:
        """Run to the end and return the result with every event.

        Cancelling the caller cancels the run, as leaving :meth:`open_run` does; ``principal`` as there.
        """
        spec = self.assistant(assistant)
        order = _RunOrder(spec, input_messages(messages), run_id or new_id(), thread_id or new_id(), None)
        try:
            await self.owned_thread(order.thread_id, principal).submit(order)
            await order.done.wait()
        finally:
            await _wait_out(order)
        assert order.result is not None
        return attrs.evolve(order.result, events=tuple(order.collected))


async def _wait_out(order: _RunOrder) -> None:
    """Cancel a run that is still going, and wait until it has recorded its result and ended (if it started)."""
    order.scope.cancel()
    if order.started.is_set():
        with trio.CancelScope(shield=True), trio.move_on_after(2 * CLEANUP_GRACE):
            await order.done.wait()


__all__ = [
    "ConversationHandle",
    "ConversationManager",
    "MessagesInput",
    "RunResult",
    "RunStream",
    "build_request",
    "input_messages",
    "serve_conversation",
]
