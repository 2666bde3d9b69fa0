"""What an MCP server asks the user during a tool call, and the user's answer.

A server asks through a handshake-era ``elicitation/create`` request sent while
the call is open, or (protocol 2026-07-28) by answering the call with an
``InputRequiredResult`` whose ``input_requests`` hold the same elicitations. Both
become one :class:`InputRequest`: a *form* (a message and a flat JSON Schema of
the fields wanted) or a *URL* the user must visit (a login, a payment). The
answer is an :class:`InputAnswer`: ``accept`` with the form's content, or
``decline`` / ``cancel``.

An embedder answers in process with an :data:`InputHandler` given to
``open_runtime(config, input_handler=...)``. Without one, a call that asks ends
with an ``input_required`` outcome holding an :class:`InputRound`: the questions,
and how to answer them later — the 2026-07-28 ``request_state`` to send back with
the answers (the call is simply made again), or, for a handshake-era server whose
call must stay open, the :class:`ParkedQuestion` the server actor holds until the
answer comes (from this process, or through the store from another:
:mod:`yao_actors.tools.parked_relay`) or ``input_timeout`` passes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Literal

import attrs
import mcp.types
import trio

from yao_actors.tools.question_schemas import fill_defaults, question_problem
from yao_actors.untrusted.urls import url_refusal

logger = logging.getLogger(__name__)

InputAction = Literal["accept", "decline", "cancel"]
"""What the user did: gave the content (``accept``), refused (``decline``), or dismissed the request (``cancel``)."""


@attrs.frozen
class InputRequest:
    """One question a server asks the user during a call of ``tool`` on ``server``.

    ``kind`` ``"form"``: ``message`` and ``schema`` (a flat JSON Schema object of
    strings, numbers, integers, booleans and enums). ``kind`` ``"url"``:
    ``message``, the ``url`` to open and the server's ``elicitation_id``.
    """

    server: str
    tool: str
    kind: Literal["form", "url"]
    message: str
    schema: Mapping[str, Any] | None = None
    url: str | None = None
    elicitation_id: str | None = None


@attrs.frozen
class InputAnswer:
    """The user's answer to an :class:`InputRequest`; ``content`` only with ``accept`` on a form."""

    action: InputAction
    content: Mapping[str, Any] | None = None


#: The error text of an outcome that asks the user (a call's question, or its task's).
ASKS_THE_USER = "the server asks the user for input"

InputHandler = Callable[[InputRequest], Awaitable[InputAnswer]]
"""Answers a server's input request in process: awaited once per request, while the call waits."""


@attrs.define(eq=False)
class ParkedQuestion:
    """A handshake-era call held open in its server actor while the user answers its question.

    The actor waits on :meth:`wait_answer` (bounded by ``input_timeout``); whoever has the answer calls
    :meth:`give` and then waits for the call's final outcome (:meth:`wait_outcome`).
    """

    ticket: str
    answer: InputAnswer | None = None
    outcome: Any = None
    _answered: trio.Event = attrs.field(factory=trio.Event)
    _finished: trio.Event = attrs.field(factory=trio.Event)
    _closed: trio.Event = attrs.field(factory=trio.Event)

    def close(self) -> None:
        """The call is no longer held for an answer (it got one, or its wait ended)."""
        self._closed.set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    def give(self, answer: InputAnswer) -> None:
        if self.answer is None:
            self.answer = answer
            self._answered.set()

    async def wait_answer(self) -> InputAnswer:
        await self._answered.wait()
        assert self.answer is not None
        return self.answer

    def finish(self, outcome: Any) -> None:
        """The call's final outcome (a ``ToolOutcome``), for whoever gave the answer."""
        if not self._finished.is_set():
            self.outcome = outcome
            self._finished.set()

    async def wait_outcome(self) -> Any:
        await self._finished.wait()
        return self.outcome


@attrs.frozen
class InputRound:
    """What a call that asked the user ended with: its questions by key, and how the answers reach the server.

    ``request_state`` (2026-07-28): the call is made again with the answers and this state. ``ticket``
    (handshake-era): the server actor holds the call open under this ticket until the answer comes.
    ``arguments`` are the arguments the server got, for calling again.
    """

    questions: tuple[tuple[str, InputRequest], ...]
    arguments: Mapping[str, Any]
    request_state: str | None = None
    ticket: str | None = None


def input_request(server: str, tool: str, params: mcp.types.ElicitRequestParams) -> InputRequest:
    """The :class:`InputRequest` an ``elicitation/create`` (or an input round's elicitation) asks."""
    if isinstance(params, mcp.types.ElicitRequestURLParams):
        return InputRequest(server, tool, "url", params.message, url=params.url, elicitation_id=params.elicitation_id)
    return InputRequest(server, tool, "form", params.message, schema=dict(params.requested_schema))


def refusal(params: mcp.types.ElicitRequestParams) -> str | None:
    """Why the question ``params`` asks is not put to the user, or ``None``: a URL question whose URL must not
    reach a person (:func:`~yao_actors.untrusted.urls.url_refusal`), or a form whose schema is not the flat one
    MCP allows (:func:`~yao_actors.tools.question_schemas.question_problem`). The server is told why instead (and so
    the model hears it)."""
    if isinstance(params, mcp.types.ElicitRequestURLParams):
        reason = url_refusal(params.url)
        return None if reason is None else f"the server's URL question was refused: {reason}"
    problem = question_problem(params.requested_schema)
    return None if problem is None else f"the client declines the question: {problem}"


def elicit_result(answer: InputAnswer, schema: Mapping[str, Any] | None) -> mcp.types.ElicitResult:
    """The ``ElicitResult`` that tells the server ``answer`` to a question of ``schema``: every answer sent to a
    server passes here (a resume, an input handler, the CLI), so the fields an accepted answer leaves out that
    have a ``default`` in the schema are filled with it here (:func:`~yao_actors.tools.question_schemas.fill_defaults`)."""
    if answer.action != "accept":
        return mcp.types.ElicitResult(action=answer.action)
    return mcp.types.ElicitResult(action="accept", content=fill_defaults(answer.content or {}, schema))


#: The most questions one input round (or one task's ``inputRequests``) puts to the user.
MAX_QUESTIONS: Final = 16


def too_many(count: int) -> str | None:
    """Why ``count`` questions at once are not put to the user (more than :data:`MAX_QUESTIONS`), or ``None``."""
    if count <= MAX_QUESTIONS:
        return None
    return f"the client declines the server's {count} questions at once: at most {MAX_QUESTIONS} are put to the user"


def input_round(
    server: str, tool: str, arguments: Mapping[str, Any], result: mcp.types.InputRequiredResult
) -> InputRound | str:
    """The :class:`InputRound` of a 2026-07-28 ``InputRequiredResult``, or why it cannot be one (it asks for
    something other than the user's input: sampling or roots, which this client does not offer; or a question
    is :func:`refusal`-ed)."""
    if (crowded := too_many(len(result.input_requests or {}))) is not None:
        return crowded
    questions: list[tuple[str, InputRequest]] = []
    for key, request in (result.input_requests or {}).items():
        if not isinstance(request, mcp.types.ElicitRequest):
            return f"the server asks for {request.method}, which this client does not answer"
        if (refused := refusal(request.params)) is not None:
            return refused
        questions.append((key, input_request(server, tool, request.params)))
    return InputRound(tuple(questions), dict(arguments), request_state=result.request_state)


__all__ = [
    "ASKS_THE_USER",
    "MAX_QUESTIONS",
    "InputAction",
    "InputAnswer",
    "InputHandler",
    "InputRequest",
    "InputRound",
    "ParkedQuestion",
    "elicit_result",
    "input_request",
    "input_round",
    "refusal",
]
