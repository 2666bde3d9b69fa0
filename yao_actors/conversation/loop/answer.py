"""One assistant's answer: what its model calls share (:class:`TurnRequest`) and how it ends (:class:`Answer`, what
:meth:`~yao_actors.conversation.loop.run.Run.answer` returns)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from yao_actors.conversation.interrupts.inputs import Pending
from yao_actors.events import Outcome
from yao_actors.models.base import Completion, Message, Model
from yao_actors.tools.catalog import Catalog


@attrs.frozen
class Answer:
    """How ``Run.answer`` ended: the text, the outcome, and the message the history gets for it."""

    text: str
    outcome: Outcome
    message: Message | None = None
    data: Any = None
    note: str | None = None
    pending: tuple[str, ...] = ()
    """Calls of client tools left for the client to answer (outcome ``client_tools``)."""
    interrupts: tuple[Pending, ...] = ()
    """Calls held for a person's approval, and servers' questions to the user (outcome ``interrupt``)."""
    authorizations: tuple[Mapping[str, Any], ...] = ()
    """``authorization_required`` interrupts: servers the run's principal must authorize (outcome ``interrupt``)."""


@attrs.frozen
class TurnRequest:
    """What every model call of one assistant's answer shares: the model (with the assistant's options), the
    request's messages (growing as calls are answered), the catalog, and the tools offered (static, then MCP)."""

    model: Model
    messages: list[Message]
    catalog: Catalog
    tools: Sequence[Mapping[str, Any]]


class MaxTurns(Exception):
    """The tool loop used all its turns and the model still asked for tools."""


def standard_answer(completion: Completion) -> Answer:
    """The standard response: the completion's text; its message joins the history unless it was executed."""
    return Answer(completion.text, Outcome.ANSWERED, None if completion.tool_calls else completion.to_message())
