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
(``timeouts.turn``, handed to dispatch). Cancelling a run (the caller left, the
consumer of its events is gone, or its deadline fired) cancels every model and
tool call under it; every tool call without a result then gets a ``cancelled``
one, so the history the thread keeps stays valid (every ``tool_calls`` entry is
answered by a ``role: tool`` message).

:class:`ConversationManager` (from :func:`open_conversations`) is what the
runtime holds: it keeps the actors by thread id in a nursery of its own and offers :meth:`~ConversationManager.open_run`
(events as a bounded receive channel) and :meth:`~ConversationManager.run`.

The package follows a run's data flow: :mod:`.window` (the history a request carries),
:mod:`.relay` (model stream → events, unique tool-call ids),
:mod:`.run` (the steps of a run, in order), :mod:`.request` (the run as its caller asked for it, one frozen
value), :mod:`.order` (a live run by owner: request, control, outlet; the streams that read it), :mod:`.journal` (the run's writes to the conversation store), :mod:`.actor` (the
per-thread actor: close-out), :mod:`.replay` (stored threads and runs read back), :mod:`.manager`
(threads loaded on demand from the store, ``RunStream``, resume, forget), :mod:`.client_tools` (the client's own
tools: offered, never dispatched, answered by the next run), :mod:`.approvals` (calls held for a person).
"""

from yao_actors.conversation.actor import new_conversation
from yao_actors.conversation.manager import ConversationManager, ConversationStatistics, open_conversations
from yao_actors.conversation.order import FollowStream, RunResult, RunStream
from yao_actors.conversation.prompt import build_request
from yao_actors.conversation.replay import StoredRunStream, ThreadHistory
from yao_actors.conversation.request import MessagesInput, RunRequest, input_messages
from yao_actors.conversation.resources import RunResources
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
