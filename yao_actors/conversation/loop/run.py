"""The run: the steps of the tool loop, in order, for one assistant over one conversation.

``Run.answer`` goes: create hook → request → first model call → argument-retry
block (≤ ``MAX_EXECUTIONS`` executions) → three-way branch (``next`` hook │
tool loop (≤ ``max_turn``) │ standard response) → fallback assistant when the
loop fails. Whatever ends it, :meth:`Run.settle` answers every tool call left
without a result, so the history stays valid.

A run uses only what its :class:`RunResources` give it: the assistants,
servers, models and catalog cache of its runtime, never the manager itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs
import trio

from yao_actors.conversation.interrupts.approvals import split_held
from yao_actors.conversation.interrupts.client_tools import CallsPending, split_calls, tool_name
from yao_actors.conversation.interrupts.inputs import held_inputs
from yao_actors.conversation.interrupts.principal_servers import authorization_interrupt
from yao_actors.conversation.loop.activity import emit_activity
from yao_actors.conversation.loop.answer import Answer, MaxTurns, TurnRequest, standard_answer
from yao_actors.conversation.loop.batch import PendingBatch, Told
from yao_actors.conversation.loop.fallback import (
    FALLBACK_ASSISTANT_ID,
    FALLBACK_DESCRIPTION,
    FALLBACK_PROMPT,
    build_fallback_brief,
    fallback_messages,
    tool_results_section,
)
from yao_actors.conversation.loop.hooks import HookContext, NextResult, resolve_hooks, run_create, run_next
from yao_actors.conversation.loop.prompt import TOOL_RETRY_PROMPT, build_request, next_payload, request_tools
from yao_actors.conversation.loop.resources import RunResources
from yao_actors.conversation.streaming.relay import DeltaRelay
from yao_actors.errors import (
    AuthorizationRequired,
    ConfigError,
    ErrorKind,
    ModelError,
    ModelTimeout,
    RunError,
    RunErrorCode,
)
from yao_actors.events import Outcome, RunEvents
from yao_actors.models.base import (
    Completion,
    Message,
    Model,
    ToolCall,
    Usage,
    images_per_turn,
    with_tool_hints,
)
from yao_actors.observability import tracing
from yao_actors.observability.runs import ModelCallObservation
from yao_actors.specs import AssistantSpec, ServerRef
from yao_actors.tools.budget import model_view
from yao_actors.tools.catalog import Catalog, select_servers
from yao_actors.tools.directory import RunServers
from yao_actors.tools.dispatch import (
    CallFinished,
    CallProgress,
    DispatchEvent,
    SequentialRetry,
    execute_tool_calls,
)
from yao_actors.tools.media import image_message, images_to_send
from yao_actors.tools.results import ToolCallResult, tool_message_content
from yao_actors.tools.task_handle import TaskWatch
from yao_actors.tools.tool_server import CallAnswers

logger = logging.getLogger(__name__)

MAX_EXECUTIONS = 3
"""Executions of one batch of tool calls in the argument-retry block (the seed's ``maxToolRetries``)."""

DEFAULT_INPUT_TIMEOUT = 600.0
"""How long a question may wait for the user when its server names no ``input_timeout`` (a test double)."""

MAX_DELEGATION_DEPTH = 4
"""Assistants deep a chain of delegations may go (hooks delegating to hooks)."""

C = TypeVar("C", Completion, None)


@attrs.define(eq=False)
class Run:
    """The state and steps of one run; everything it learns is kept so a cancelled run can still be recorded.

    Its collaborators come with it: the runtime's ``resources``, the ``events`` it emits through, the
    ``transcript`` it appends its messages to (the journal's, which writes them behind it), its ``checkpoint``
    and its client's tools. Nothing sets them from outside afterwards.
    """

    resources: RunResources
    events: RunEvents
    servers: RunServers
    """The servers it calls, bound to its principal as it names them (a create hook's, a delegate's too)."""
    transcript: list[Message] = attrs.field(factory=list)
    results: list[ToolCallResult] = attrs.field(factory=list)
    usage: Usage = attrs.field(factory=Usage)
    last_text: str = ""
    batch: PendingBatch | None = None
    relay: DeltaRelay | None = None
    step: str | None = None
    subagents: list[str] = attrs.field(factory=list)
    counter: int = 0
    call_ids: set[str] = attrs.field(factory=set)
    call_counter: int = 0
    #: Before a tool batch (False: the events so far may be written), after it (True: a whole turn): the journal's.
    checkpoint: Callable[[bool], None] = attrs.field(default=lambda whole_turn: None)
    client_tools: tuple[Mapping[str, Any], ...] = ()
    """Tools of the run's client: offered after the assistant's, never dispatched (:mod:`~yao_actors.conversation.interrupts.client_tools`)."""
    needs_authorization: dict[str, AuthorizationRequired] = attrs.field(factory=dict)
    """The servers its principal must authorize first, by id (the run ends with their interrupts)."""
    task_watch: Callable[[ToolCall], TaskWatch] | None = None
    """Where a call answered with a task keeps it (the run's store: :mod:`~yao_actors.conversation.durable.task_keeping`)."""

    @property
    def client_names(self) -> frozenset[str]:
        return frozenset(tool_name(tool) for tool in self.client_tools)

    def new_message_id(self) -> str:
        self.counter += 1
        return f"{self.events.run_id}.{self.counter}"

    def unique_call_id(self, given: str | None) -> str:
        """The model's call id when it is new in this run, else a fresh ``call_<n>`` (empty or duplicate ids)."""
        call_id = given or ""
        while not call_id or call_id in self.call_ids:
            self.call_counter += 1
            call_id = f"call_{self.call_counter}"
        self.call_ids.add(call_id)
        return call_id

    # ------------------------------------------------------------------ the loop

    async def answer(self, assistant: AssistantSpec, conversation: list[Message], depth: int) -> Answer:
        """Steps 1–6 for ``assistant`` over ``conversation`` (history and input, no system prompts)."""
        hooks = resolve_hooks(assistant.hooks)
        ctx = HookContext(assistant.id, self.events.thread_id, self.events.run_id)
        created = await run_create(hooks, ctx, conversation)
        if created.messages:
            conversation = list(created.messages)
        if created.delegate is not None:
            return await self.delegate(created.delegate, conversation, depth)
        catalog = await self.catalog(assistant, created.servers or ())
        if self.needs_authorization:
            now = self.resources.clock()
            asked = tuple(authorization_interrupt(n, now) for n in self.needs_authorization.values())
            return Answer(self.last_text, Outcome.INTERRUPT, authorizations=asked)
        request = TurnRequest(
            with_tool_hints(self.resources.model(assistant.model, assistant.options), catalog.hints),
            build_request(self.resources.prompts, assistant, catalog, conversation),
            catalog,
            (*request_tools(assistant, catalog), *self.client_tools),
        )
        completion = await self.call_model(assistant, request.model, request.messages, request.tools, "turn 1")
        try:
            if completion.tool_calls:
                completion = await self.retry_block(assistant, request, completion)
            if hooks.next is not None:
                payload = next_payload(conversation, completion, self.results)
                return await self.next_branch(await run_next(hooks, ctx, payload), completion, conversation, depth)
            if not completion.tool_calls or not assistant.tool_loop:
                return standard_answer(completion)
            return await self.tool_loop(assistant, request)
        except CallsPending as pending:
            outcome = Outcome.INTERRUPT if pending.held else Outcome.CLIENT_TOOLS
            return Answer(self.last_text, outcome, pending=pending.call_ids, interrupts=pending.held)
        except ModelError as error:
            if assistant.fallback is False:
                raise
            return await self.fallback(assistant, conversation, f"a model call failed: {error}")
        except MaxTurns as reached:
            if assistant.fallback is False:
                raise RunError(str(reached), code=RunErrorCode.MAX_TURNS) from None
            return await self.fallback(assistant, conversation, str(reached))

    async def retry_block(self, assistant: AssistantSpec, request: TurnRequest, completion: Completion) -> Completion:
        """Execute the calls; re-ask the model to fix retryable failures, at most 3 executions in all.

        Returns the last completion: its calls are executed, or it has none (the model answered the retry in
        plain text, which is accepted). Non-retryable failures are not retried: the model gets them as
        ``Error: ...`` results like any other.
        """
        for execution in range(1, MAX_EXECUTIONS + 1):
            results = await self.execute(assistant, request, completion)
            failed = [r.call_id for r in results if not r.ok and r.retryable]
            if not failed or execution == MAX_EXECUTIONS:
                break
            await self.events.tool_retry(execution, failed)
            tracing.add_event("yao.tool_retry", {"yao.retry.execution": execution, "yao.retry.call_ids": failed})
            retry_request = [*request.messages, {"role": "system", "content": TOOL_RETRY_PROMPT}]
            completion = await self.call_model(
                assistant, request.model, retry_request, request.tools, f"retry {execution}"
            )
            if not completion.tool_calls:
                break
        return completion

    async def tool_loop(self, assistant: AssistantSpec, request: TurnRequest) -> Answer:
        """Up to ``max_turn`` model calls, executing each turn's calls, until the model asks for none.

        Their steps go on from the first call's ``turn 1``: ``turn 2``, ``turn 3``, ...
        """
        for turn in range(1, assistant.max_turn + 1):
            completion = await self.call_model(
                assistant, request.model, request.messages, request.tools, f"turn {turn + 1}"
            )
            if not completion.tool_calls:
                return Answer(completion.text, Outcome.ANSWERED, completion.to_message())
            await self.execute(assistant, request, completion)
        raise MaxTurns(f"tool loop reached max turns ({assistant.max_turn})")

    async def next_branch(
        self, decided: NextResult | None, completion: Completion, conversation: list[Message], depth: int
    ) -> Answer:
        """What the ``next`` hook decided: the standard response, data, or a delegation."""
        if decided is None:
            return standard_answer(completion)
        if decided.delegate is not None:
            messages = conversation if decided.delegate.messages is None else list(decided.delegate.messages)
            return await self.delegate(decided.delegate.assistant_id, messages, depth)
        return Answer(completion.text, Outcome.DATA, data=decided.data)

    async def delegate(self, assistant_id: str, conversation: list[Message], depth: int) -> Answer:
        """Run another assistant on the conversation, as a subagent of this run."""
        if depth >= MAX_DELEGATION_DEPTH:
            raise RunError(f"delegation deeper than {MAX_DELEGATION_DEPTH} assistants", code=RunErrorCode.HOOK_ERROR)
        target = self.resources.assistant(assistant_id)
        subagent_id = await self.subagent_started(target.id)
        agent = {tracing.OPERATION: "invoke_agent", tracing.AGENT_NAME: target.id}
        with self.events.attributed_to(subagent_id), tracing.open_span(f"invoke_agent {target.id}", agent):
            answer = await self.answer(target, conversation, depth + 1)
        await self.events.subagent_finished(subagent_id, {"text": answer.text, "outcome": answer.outcome.value})
        self.subagents.remove(subagent_id)
        return answer

    async def fallback(self, assistant: AssistantSpec, conversation: list[Message], reason: str) -> Answer:
        """Step 6: the fallback assistant synthesises an answer from everything the run has.

        The built-in one (the seed's prompt, ``fallback_model`` or the
        assistant's model), or the configured assistant ``fallback`` names (its
        own prompts, model and options). When it fails too, whatever the
        failure, the run still answers (the hard fallback): the last text a
        model produced, or else the tool results as readable text.
        """
        logger.warning("run %s: %s; delegating to the fallback assistant", self.events.run_id, reason)
        tracing.add_event("yao.fallback", {"yao.fallback.reason": reason})
        brief = build_fallback_brief(assistant.prompt, conversation, self.results, assistant.result_budget)
        named = assistant.fallback if isinstance(assistant.fallback, str) else None
        subagent_id = await self.subagent_started(
            named or FALLBACK_ASSISTANT_ID, None if named else FALLBACK_DESCRIPTION
        )
        try:
            if named:
                target = self.resources.assistant(named)
                prompts, model = target.prompt, self.resources.model(target.model, target.options)
            else:
                prompts, model = (FALLBACK_PROMPT,), self.resources.model(assistant.fallback_model or assistant.model)
            request = fallback_messages(brief, (*self.resources.prompts, *prompts))
            with self.events.attributed_to(subagent_id):
                completion = await self.call_model(assistant, model, request, [], "fallback")
        except Exception as error:
            code = error.code if isinstance(error, RunError) else RunErrorCode.MODEL_ERROR
            await self.events.subagent_error(subagent_id, str(error), code=code)
            self.subagents.remove(subagent_id)
            note = f"{reason}; the fallback assistant failed too ({error}): finished with what the run has"
            text = self.last_text or tool_results_section(self.results, assistant.result_budget)
            return Answer(text, Outcome.DEGRADED, note=note)
        await self.events.subagent_finished(subagent_id, {"text": completion.text})
        self.subagents.remove(subagent_id)
        return Answer(completion.text, Outcome.FALLBACK, {"role": "assistant", "content": completion.text}, note=reason)

    # ------------------------------------------------------------------ the pieces

    async def subagent_started(self, name: str, description: str | None = None) -> str:
        """Announce a subagent invocation; it stays open (``self.subagents``) until it finishes."""
        subagent_id = self.new_message_id()
        await self.events.subagent_started(subagent_id, name, description=description)
        self.subagents.append(subagent_id)
        return subagent_id

    def connection_of(self, server_id: str) -> dict[str, str | None]:
        """The MCP protocol version the server's last connection spoke and the tasks design it offers (``None``:
        never connected, no server, no tasks)."""
        server = self.servers.get(server_id)
        if server is None:
            return {"protocol": None, "tasks": None}
        statistics = server.statistics()
        return {"protocol": statistics.protocol, "tasks": statistics.tasks}

    async def catalog(self, assistant: AssistantSpec, override: Sequence[ServerRef]) -> Catalog:
        bound = await self.servers.bind(ref.server_id for ref in select_servers(assistant, override))
        self.needs_authorization.update(bound.needed)
        for server_id, problem in bound.problems.items():
            await self.events.server_status(server_id, "down", problem)
        try:
            catalog = await self.servers.catalogs.get(assistant, self.servers.by_id, override=override)
        except ConfigError as error:
            raise RunError(str(error), code=RunErrorCode.CONFIG_ERROR) from error
        for warning in catalog.warnings:
            logger.warning("assistant %s: %s", assistant.id, warning)
        for server_id, state in catalog.unavailable.items():
            await self.events.server_status(
                server_id, state, "its tools are not offered", **self.connection_of(server_id)
            )
        for server_id, reason in catalog.not_offered().items():
            await self.events.server_status(server_id, "tools_capped", reason)
        for server_id, notes in catalog.schema_notes.items():
            await self.events.server_status(server_id, "schema_not_enforced", notes)
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
        self.relay = DeltaRelay(self.events, self.new_message_id, self.unique_call_id)
        await self.events.step_started(step)
        self.step = step
        try:
            with ModelCallObservation(model.name, step) as observed:
                timeout = assistant.timeouts.model  # a plain scope: trio.fail_after wraps one in a generator
                with trio.CancelScope(deadline=trio.current_time() + timeout) as deadline:
                    view = model_view(messages, assistant.result_budget)
                    completion = await model.complete(view, tools, on_delta=self.relay.on_delta)
                if deadline.cancelled_caught:
                    raise ModelTimeout(f"model {model.name!r} did not answer within {timeout} s")
                observed.completed(completion)
        except Exception:
            await self.end_step(None)
            raise
        completion = await self.end_step(completion)
        self.last_text = completion.text or self.last_text
        if completion.usage is not None:
            self.usage += completion.usage
            await self.events.usage(completion.usage, model=model.name)
        return completion

    async def end_step(self, completion: C) -> C:
        """Close the model call's open messages (filling in what was not streamed) and its step; returns
        ``completion`` with every tool call under the id its events used (unique in the run)."""
        if self.relay is not None:
            if completion is None:
                await self.relay.close()
            else:
                completion = await self.relay.finish(completion)
            self.relay = None
        if self.step is not None:
            await self.events.step_finished(self.step)
            self.step = None
        return completion

    async def execute(
        self, assistant: AssistantSpec, request: TurnRequest, completion: Completion
    ) -> list[ToolCallResult]:
        """Run a completion's tool calls; append its assistant message and one tool message per call (and the
        images of the results, for a model that takes them: :mod:`yao_actors.tools.media`).

        Calls of client tools, and calls that need approval, are not run: once the others are done,
        :class:`CallsPending` ends the run.
        """
        messages, catalog = request.messages, request.catalog
        message = completion.to_message()
        messages.append(message)
        self.transcript.append(message)
        self.checkpoint(False)
        ours, theirs = split_calls(completion.tool_calls, self.client_names)
        ours, held = split_held(self.resources.approvals, assistant, ours, catalog, self.resources.clock())
        results = await self.dispatch(ours, catalog, assistant.timeouts.turn, messages, images_per_turn(request.model))
        self.checkpoint(True)
        asked = held_inputs(results, ours, self.resources.clock(), self.input_timeout)
        if theirs or held or asked:
            raise CallsPending([call.id for call in theirs], [*held, *asked])
        return results

    async def dispatch(
        self,
        calls: Sequence[ToolCall],
        catalog: Catalog,
        batch_timeout: float,
        messages: list[Message],
        images: int = 0,
        answers: Mapping[str, CallAnswers] | None = None,
    ) -> list[ToolCallResult]:
        """Execute a batch of calls on the run's servers within ``batch_timeout`` seconds (dispatch's own
        deadline), telling each result as an event as it comes, then answer each call with a tool message
        (:meth:`record`, into ``messages`` and the transcript); returns the results, in call order. ``answers``
        (by call id) give calls the user's answers to what earlier calls of them asked. While it runs the batch is
        :attr:`batch`: a run cancelled meanwhile settles it."""
        batch = self.batch = PendingBatch(tuple(calls), catalog)
        # Every call asks its server for progress (a progress token): the run tells it as tool_progress events,
        # which go to the run's log and every client of it, and a server may report any time.
        await execute_tool_calls(
            calls,
            catalog,
            self.servers.by_id,
            batch_timeout=batch_timeout,
            on_event=self.on_dispatch,
            answers=answers,
            tasks=self.task_watch,
        )
        self.batch = None
        told = batch.finished()
        self.record(told, messages, images)
        return [each.result for each in told]

    def input_timeout(self, server_id: str) -> float:
        """How long a server's question may wait for the user's answer (its ``input_timeout``)."""
        server = self.servers.get(server_id)
        return DEFAULT_INPUT_TIMEOUT if server is None else server.spec.input_timeout

    async def on_dispatch(self, event: DispatchEvent) -> None:
        """Tell a dispatch event as AG-UI events (``CallStarted``: nothing, the model's message announced it)."""
        if isinstance(event, CallFinished):
            batch = self.batch
            assert batch is not None  # dispatch's events come while it runs
            batch.told[event.index] = Told(event.result)
            if event.result.kind is ErrorKind.INPUT_REQUIRED:
                return  # not a result: the call waits for the user's answer, the run ends with an interrupt
            media_bytes = self.resources.media_bytes
            sent = await self.events.tool_call_result(self.new_message_id(), event.result, media_bytes=media_bytes)
            batch.told[event.index] = Told(event.result, sent["content"])
            if event.result.app is not None:
                await emit_activity(self.events, self.new_message_id(), event.result.app, media_bytes)
            if event.result.kind is ErrorKind.SERVER_UNAVAILABLE and event.result.server:
                server_id = event.result.server
                connection = self.connection_of(server_id)
                await self.events.server_status(server_id, "unavailable", event.result.error, **connection)
        elif isinstance(event, CallProgress):
            await self.events.tool_progress(event.call.id, event.progress, event.total, event.message)
        elif isinstance(event, SequentialRetry):
            await self.events.sequential_retry(event.call_ids)
            tracing.add_event("yao.sequential_retry", {"yao.retry.call_ids": event.call_ids})

    def record(self, told: Sequence[Told], messages: list[Message] | None = None, images: int = 0) -> None:
        """Keep a batch's results and answer each of its calls with a tool message (the content its
        ``TOOL_CALL_RESULT`` carried, else encoded here). The request (``messages``) of a model taking ``images``
        a turn also gets the images, after the tool messages; the transcript keeps the placeholders."""
        results = [each.result for each in told]
        sent = images_to_send(results, images) if messages is not None else [0] * len(results)
        for index, each in enumerate(told):
            result = each.result
            if result.kind is ErrorKind.INPUT_REQUIRED:
                continue  # the call stays open: its result comes once the user has answered
            self.results.append(result)
            content = each.content if each.content is not None else tool_message_content(result)
            tool_message = {"role": "tool", "tool_call_id": result.call_id, "content": content}
            self.transcript.append(tool_message)
            if messages is not None:
                if sent[index]:
                    tool_message = {**tool_message, "content": tool_message_content(result, sent[index])}
                messages.append(tool_message)
        if messages is not None and any(sent):
            messages.append(image_message(results, sent))

    def settle(self) -> list[ToolCallResult]:
        """After a cancellation or failure: give every unanswered call of the batch a ``cancelled`` result;
        returns the batch's results whose ``TOOL_CALL_RESULT`` is still to be emitted."""
        if self.batch is None:
            return []
        batch, self.batch = self.batch, None
        told = batch.settled()
        self.record(told)
        return [each.result for each in told if each.content is None]

    def forget_unseen(self, shown: Sequence[Mapping[str, Any]]) -> None:
        """Forget what the run opened in events nobody saw (its store refused them): the close-out then closes only
        the messages, tool calls, step and subagents whose opening event is among ``shown``."""
        opened = {(e["type"], e.get("messageId") or e.get("toolCallId") or e.get("subagentRunId")) for e in shown}
        if self.relay is not None:
            self.relay.forget_unseen(opened)
        steps = [e for e in shown if e["type"] in ("STEP_STARTED", "STEP_FINISHED")]
        if not steps or steps[-1]["type"] != "STEP_STARTED" or steps[-1]["stepName"] != self.step:
            self.step = None
        self.subagents = [s for s in self.subagents if ("SUBAGENT_STARTED", s) in opened]

    async def emit_settled(self, unreported: Sequence[ToolCallResult]) -> None:
        """Close what the run left open (messages, step, subagents) and emit the results :meth:`settle` made."""
        await self.end_step(None)
        for result in unreported:
            await self.events.tool_call_result(self.new_message_id(), result)
        while self.subagents:
            message = "the run ended before the subagent finished"
            await self.events.subagent_error(self.subagents.pop(), message, code=RunErrorCode.RUN_ENDED)
