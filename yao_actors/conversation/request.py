"""A run request: what a caller asks a runtime to run, built once where the request comes in, then passed whole.

A websocket ``run`` frame and a ``POST /agui`` body each become one (their ``to_request``), an embedder builds
one (``RunRequest("default", "question", thread_id="t1")``) or lets ``runtime.run`` / ``runtime.open_run``
build it from the same arguments (:func:`as_request`). From there on the request is one frozen value: the
runtime hands it to the conversation manager, the manager to the thread's actor, and nobody changes it. Its ids
are decided when it is built: a request without a ``thread_id`` starts a new thread under a fresh id, one without
a ``run_id`` gets a fresh run id.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from yao_actors.models.base import Message
from yao_actors.specs import AssistantSpec

MessagesInput = str | Sequence[Message]
"""A run's input: one user message as text, or a list of chat messages."""


def new_id() -> str:
    """A fresh thread or run id."""
    return uuid.uuid4().hex


def input_messages(messages: MessagesInput) -> tuple[Message, ...]:
    """A run's input as chat messages (text is one user message), each copied."""
    if isinstance(messages, str):
        return ({"role": "user", "content": messages},)
    return tuple(dict(m) for m in messages)


def _history(messages: Sequence[Message] | None) -> tuple[Message, ...] | None:
    return None if messages is None else tuple(dict(m) for m in messages)


def _entries(entries: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    return tuple(entries)


def _id(given: str | None) -> str:
    return given or new_id()


@attrs.frozen
class RunRequest:
    """One run as its caller asked for it (see the module docstring).

    ``assistant`` is an assistant id (or a spec); ``messages`` the run's new input (text is one user message).
    ``thread_id`` names the thread (``None``: a new one, under a fresh id); ``run_id`` the run (``None``: a fresh
    id). ``principal`` is who asks: a thread belongs to the principal that created it. ``history``, when given,
    replaces the thread's history before the run (an AG-UI client sends the whole conversation every time).
    ``client_tools`` are tools the client runs itself (function tools, offered after the assistant's, never
    dispatched); ``resume`` the AG-UI entries answering the thread's interrupts. ``continues``: the run is not
    new but one a dead process left waiting on a stored task, taken up here under its own id
    (:mod:`~yao_actors.conversation.durable.task_resume`).
    """

    assistant: str | AssistantSpec
    messages: tuple[Message, ...] = attrs.field(converter=input_messages)
    thread_id: str = attrs.field(default=None, converter=_id)
    run_id: str = attrs.field(default=None, converter=_id)
    principal: str | None = None
    history: tuple[Message, ...] | None = attrs.field(default=None, converter=_history)
    client_tools: tuple[Mapping[str, Any], ...] = attrs.field(default=(), converter=_entries)
    resume: tuple[Mapping[str, Any], ...] = attrs.field(default=(), converter=_entries)
    continues: bool = False


def as_request(
    request: RunRequest | str | AssistantSpec, messages: MessagesInput | None, options: Mapping[str, Any]
) -> RunRequest:
    """The request a convenience call names: ``request`` itself, or one built from an assistant, its ``messages``
    and the request's other fields as keywords (``thread_id=...``); ``TypeError`` when the two forms are mixed."""
    if isinstance(request, RunRequest):
        if messages is not None or options:
            raise TypeError("pass either a RunRequest alone, or an assistant, its messages and keyword options")
        return request
    if messages is None:
        raise TypeError("a run needs its messages: run(assistant, messages, ...)")
    return RunRequest(request, messages, **options)
