"""The conversation actor and the run.

One actor per thread owns the thread's message history and executes that
thread's runs one at a time, in the order they were submitted; runs of other
threads go on concurrently. A run goes::

    create hook ─▶ request (global and assistant prompts, samples, windowed history, input; static and MCP tools)
      ─▶ first model call ─▶ argument-retry block (≤ 3 executions)
      ─▶ next hook │ tool loop (≤ max_turn) │ standard response
      ─▶ fallback assistant when the loop fails (or RUN_ERROR max_turns with ``fallback: false``)
      ─▶ exactly one RUN_FINISHED (always with an answer) or RUN_ERROR

Deadlines are cancel scopes set here, by the caller of each piece: the run's
(``timeouts.run``), each model call's (``timeouts.model``), and each tool batch's
(``timeouts.turn``, handed to dispatch). A call its server answers with an MCP task waits for it up to the
assistant's ``task_timeout`` instead: the turn's deadline bounded only the request that created the task, and the
run's stands still while the run waits (:mod:`.run_deadline`). Cancelling a run (the caller left, the
consumer of its events is gone, or its deadline fired) cancels every model and
tool call under it; every tool call without a result then gets a ``cancelled``
one, so the history the thread keeps stays valid (every ``tool_calls`` entry is
answered by a ``role: tool`` message).

:class:`ConversationManager` (from :func:`open_conversations`) is what the
runtime holds: it keeps the actors by thread id in a nursery of its own and offers :meth:`~ConversationManager.open_run`
(events as a bounded receive channel) and :meth:`~ConversationManager.run`.

Its rooms, by idea: the actor and what it is handed here (:mod:`.request`, the run as its caller asked for it;
:mod:`.order`, a live run by owner and the streams that read it; :mod:`.manager`, starting, resuming and forgetting
runs; :mod:`.kept_threads`, the thread actors kept in memory within their budgets; :mod:`.live_runs`, the runs going
on by id; :mod:`.actor` and :mod:`.thread`, the per-thread actor and what it publishes; :mod:`.starting` and
:mod:`.ending`, how a run starts and ends; :mod:`.run_deadline`, the run's deadline), :mod:`.loop` (the run's
steps), :mod:`.durable` (the store: journal, leases, replay),
:mod:`.interrupts` (approvals, the user's answers, client tools, authorization) and :mod:`.streaming` (model
stream → events → readers).
"""

from yao_actors.conversation.actor import new_conversation
from yao_actors.conversation.durable.replay import StoredRunStream, ThreadHistory
from yao_actors.conversation.loop.prompt import build_request
from yao_actors.conversation.loop.resources import RunResources
from yao_actors.conversation.manager import ConversationManager, ConversationStatistics, open_conversations
from yao_actors.conversation.order import FollowStream, RunResult, RunStream
from yao_actors.conversation.request import MessagesInput, RunRequest, input_messages
from yao_actors.conversation.thread import ConversationHandle

__all__ = [
    "ConversationHandle",
    "ConversationManager",
    "ConversationStatistics",
    "FollowStream",
    "MessagesInput",
    "RunRequest",
    "RunResources",
    "RunResult",
    "RunStream",
    "StoredRunStream",
    "ThreadHistory",
    "build_request",
    "input_messages",
    "new_conversation",
    "open_conversations",
]
