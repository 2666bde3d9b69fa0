"""What an MCP server asks the user during a tool call, and the user's answer.

A server asks through a handshake-era ``elicitation/create`` request sent while
the call is open, or (protocol 2026-07-28) by answering the call with an
``InputRequiredResult`` whose ``input_requests`` hold the same elicitations. Both
become one :class:`InputRequest`: a *form* (a message and a flat JSON Schema of
the fields wanted) or a *URL* the user must visit (a login, a payment). The
answer is an :class:`InputAnswer`: ``accept`` with the form's content, or
``decline`` / ``cancel``.

An embedder answers in process with an :data:`InputHandler` given to
``open_runtime(config, input_handler=...)``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import attrs
import mcp.types

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


InputHandler = Callable[[InputRequest], Awaitable[InputAnswer]]
"""Answers a server's input request in process: awaited once per request, while the call waits."""


def input_request(server: str, tool: str, params: mcp.types.ElicitRequestParams) -> InputRequest:
    """The :class:`InputRequest` an ``elicitation/create`` (or an input round's elicitation) asks."""
    if isinstance(params, mcp.types.ElicitRequestURLParams):
        return InputRequest(server, tool, "url", params.message, url=params.url, elicitation_id=params.elicitation_id)
    return InputRequest(server, tool, "form", params.message, schema=dict(params.requested_schema))


def elicit_result(answer: InputAnswer) -> mcp.types.ElicitResult:
    """The ``ElicitResult`` that tells the server ``answer``."""
    content = dict(answer.content) if answer.action == "accept" and answer.content is not None else None
    return mcp.types.ElicitResult(action=answer.action, content=content)


__all__ = ["InputAction", "InputAnswer", "InputHandler", "InputRequest", "elicit_result", "input_request"]
