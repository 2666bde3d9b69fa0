"""An AG-UI ``RunAgentInput`` (the body of ``POST /agui``) as a run of this service.

AG-UI clients send the whole conversation on every run, in AG-UI message form (camelCase, ``toolCalls``,
``toolCallId``, content as text or parts). :func:`parse_run_input` checks the body with ``ag_ui``'s own
``RunAgentInput`` model and turns it into an :class:`AguiRun`: the conversation in the seed's message shapes
(``tool_calls``, ``tool_call_id``), split into the thread's history (everything up to and including the last
assistant message) and the run's new input (what came after it), the client's tools as the model's function
tools, and the ``resume`` entries.

A body that is not JSON, nests too deeply or holds text that is not UTF-8 is :class:`InputError` 400; one that
is JSON but not a valid ``RunAgentInput``, or that uses what this service does not take (a message part
other than text, a ``system`` / ``developer`` message the operator did not allow), is 422. Each names the field.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

import attrs
import pydantic
from ag_ui.core import (
    AssistantMessage,
    DeveloperMessage,
    RunAgentInput,
    SystemMessage,
    ToolMessage,
    UserMessage,
)

from yao_actors.conversation.request import RunRequest
from yao_actors.service.frame_safety import MAX_DEPTH, hostile_value
from yao_actors.service.protocol import DEFAULT_ASSISTANT, function_tool, proxied_request

Message = dict[str, Any]

#: The key of ``forwardedProps`` naming the assistant (when the path does not).
ASSISTANT_PROP: Final = "assistant"


class InputError(Exception):
    """A body this service does not take: ``status`` 400 (not a readable body) or 422 (not a valid run)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@attrs.frozen
class AguiRun:
    """A run as an AG-UI client asked for it, in this service's terms."""

    thread_id: str
    run_id: str
    assistant: str
    history: tuple[Message, ...]
    """The conversation before the run's new input: the thread's history becomes this."""
    messages: tuple[Message, ...]
    """The run's new input: the messages after the conversation's last assistant message."""
    tools: tuple[Mapping[str, Any], ...] = ()
    """The client's tools, as OpenAI-style function tools."""
    resume: tuple[Mapping[str, Any], ...] = ()
    """The ``resume`` entries (``interruptId``, ``status``, ``payload``), as sent."""
    proxied: Any = None
    """``forwardedProps.__proxiedMCPRequest``: an app's MCP request (:mod:`yao_actors.service.app_proxy`), not a run."""

    def to_request(self, principal: str | None) -> RunRequest:
        """The run this input asks for, as ``principal`` (the bearer token's): its history replaces the thread's."""
        return RunRequest(
            self.assistant,
            self.messages,
            thread_id=self.thread_id,
            run_id=self.run_id,
            principal=principal,
            history=self.history,
            client_tools=self.tools,
            resume=self.resume,
        )


def parse_run_input(body: bytes, *, assistant: str | None, client_roles: Collection[str]) -> AguiRun:
    """Read a ``RunAgentInput`` body; ``assistant`` is the one the path names (``None``: ``forwardedProps``).

    ``client_roles`` are the roles of ``server.allow_client_roles``: ``system`` and ``developer`` messages are
    taken only when listed there (user, assistant and tool messages are the conversation itself).
    """
    try:
        data = json.loads(body)
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError, an integer too long to convert
        raise InputError(400, f"the body is not valid JSON: {error}") from None
    except RecursionError:
        raise InputError(400, f"the body is nested deeper than {MAX_DEPTH} levels") from None
    hostile = hostile_value(data)
    if hostile is not None:
        raise InputError(400, hostile)
    if not isinstance(data, dict):
        raise InputError(422, "the body must be a JSON object (an AG-UI RunAgentInput)")
    try:
        run_input = RunAgentInput.model_validate(data)
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise InputError(422, f"{where}: {first['msg']} (not a valid AG-UI RunAgentInput)") from None
    messages = [_message(m, index, client_roles) for index, m in enumerate(run_input.messages)]
    conversation = _one_message_per_turn([m for m in messages if m is not None])
    last_assistant = max((i for i, m in enumerate(conversation) if m["role"] == "assistant"), default=-1)
    return AguiRun(
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        assistant=assistant or _assistant_prop(run_input.forwarded_props),
        history=tuple(conversation[: last_assistant + 1]),
        messages=tuple(conversation[last_assistant + 1 :]),
        tools=tuple(function_tool(tool.name, tool.description, tool.parameters) for tool in run_input.tools or ()),
        resume=tuple(entry.model_dump(by_alias=True, exclude_none=True) for entry in run_input.resume or ()),
        proxied=proxied_request(run_input.forwarded_props),
    )


def _one_message_per_turn(messages: list[Message]) -> list[Message]:
    """Merge assistant messages that follow each other into one (their text, then their tool calls in order).

    An AG-UI client builds an assistant message per tool call when the events name no parent message, which
    puts ``[assistant(c1), assistant(c2), tool(c1), tool(c2)]`` in the conversation; a model API wants each
    assistant message with ``tool_calls`` followed by their tool messages, so the turn becomes one message.
    """
    merged: list[Message] = []
    for message in messages:
        previous = merged[-1] if merged else None
        if previous is not None and previous["role"] == message["role"] == "assistant":
            previous["content"] = "".join((previous["content"], message["content"]))
            calls = [*previous.get("tool_calls", ()), *message.get("tool_calls", ())]
            if calls:
                previous["tool_calls"] = calls
        else:
            merged.append(message)
    return merged


def _assistant_prop(props: Any) -> str:
    if isinstance(props, dict) and ASSISTANT_PROP in props:
        name = props[ASSISTANT_PROP]
        if not isinstance(name, str) or not name:
            raise InputError(422, "forwardedProps.assistant: must be a non-empty string (an assistant id)")
        return name
    return DEFAULT_ASSISTANT


def _message(message: Any, index: int, client_roles: Collection[str]) -> Message | None:
    """One AG-UI message in the seed's shape; ``None`` for kinds the model never sees (activity, reasoning)."""
    where = f"messages.{index}"
    if isinstance(message, UserMessage):
        return {"role": "user", "content": _text(message.content, where)}
    if isinstance(message, AssistantMessage):
        converted: Message = {"role": "assistant", "content": message.content or ""}
        if message.tool_calls:
            converted["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in message.tool_calls
            ]
        return converted
    if isinstance(message, ToolMessage):
        content = _text(message.content, where)
        if message.error and not content:
            content = f"Error: {message.error}"
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": content}
    if isinstance(message, SystemMessage | DeveloperMessage):
        if message.role not in client_roles:
            raise InputError(
                422,
                f"{where}.role: {message.role!r} messages are not accepted from clients (the operator may allow "
                "them with server.allow_client_roles)",
            )
        return {"role": message.role, "content": message.content}
    return None


def _text(content: str | Sequence[Any], where: str) -> str:
    """Message content as text: a string, or the text parts of a list of parts joined (other parts refused)."""
    if isinstance(content, str):
        return content
    texts = []
    for index, part in enumerate(content):
        if getattr(part, "type", None) != "text":
            kind = getattr(part, "type", type(part).__name__)
            raise InputError(422, f"{where}.content.{index}: {kind!r} parts are not supported; send text")
        texts.append(part.text)
    return "\n".join(texts)
