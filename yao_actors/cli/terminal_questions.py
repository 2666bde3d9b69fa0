"""Asking a person on a terminal what a run waits for: an approval, a server's form field by field, a URL to
visit — and the ``resume`` entry their replies make (:func:`decide`).

``Ask`` is how a question reaches a person: the question in, the reply out, ``None`` when nobody can answer
(the input ended). :class:`LineReader` is the terminal's (or a pipe's: each line of standard input is the next
reply, echoed after its question so the transcript reads as a conversation). :func:`ask_field` asks one field of
a form as MCP's elicitation allows it — a string (with ``format`` email, uri, date or date-time), a number or an
integer (``minimum``/``maximum``), a boolean, an enum (plain, or titled: ``oneOf`` of ``const``/``title``) or a
multi-select (``type: array`` whose ``items`` are an ``enum`` or an ``anyOf`` of ``const``/``title``) — shows the
field's default and takes an empty reply as it; a reply that does not fit is explained and asked again.
``/decline`` or ``/cancel`` at any field answers the whole form so.
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any, Final, TextIO
from urllib.parse import urlsplit

import attrs
import trio

from yao_actors.untrusted.urls import url_refusal

Ask = Callable[[str], Awaitable[str | None]]
"""How a question reaches a person: the question in, the reply out (``None``: nobody answers, the input ended).
A question ending in ``?`` is yes or no (``y``/``yes`` is yes)."""

#: Tries a field gets before its reply is sent as it was typed (the service then names what is wrong with it).
FIELD_TRIES: Final = 3
#: Replies to a form field that answer the whole form instead.
FORM_ACTIONS: Final = {"/decline": "decline", "/cancel": "cancel"}


class NoAnswer(Exception):
    """Nobody is there to answer (standard input ended)."""


class FormAnswered(Exception):
    """The person declined or cancelled the whole form (``action``) at one of its fields."""

    def __init__(self, action: str) -> None:
        super().__init__(action)
        self.action = action


@attrs.define
class LineReader:
    """Reads a person's lines: with ``input()`` on a terminal (line editing, history), else line by line from
    ``stream``, echoing each after its prompt on ``out``. ``None`` once the input ended."""

    stream: TextIO
    out: TextIO
    interactive: bool

    @classmethod
    def standard(cls) -> LineReader:
        """The process's own standard input and output; on a terminal with line editing and the lines typed
        before (``readline``, where the platform has it)."""
        interactive = sys.stdin.isatty()
        if interactive:
            with suppress(ImportError):
                import readline  # noqa: F401 - input() edits lines and keeps their history once it is loaded
        return cls(sys.stdin, sys.stdout, interactive)

    async def read(self, prompt: str) -> str | None:
        """The next line (without its end), after showing ``prompt``."""
        if self.interactive:
            try:
                return await trio.to_thread.run_sync(input, prompt, abandon_on_cancel=True)
            except EOFError:
                return None
        line = await trio.to_thread.run_sync(self.stream.readline, abandon_on_cancel=True)
        if not line:
            return None
        line = line.rstrip("\r\n")
        self.out.write(f"{prompt}{line}\n")
        self.out.flush()
        return line

    async def ask(self, question: str) -> str | None:
        """:data:`Ask` on this reader: ``[y/N]`` after a yes-or-no question, ``: `` after a field."""
        return await self.read(f"{question} [y/N] " if question.endswith("?") else f"{question}: ")


async def ask_terminal(question: str) -> str | None:
    """:data:`Ask` on the process's standard input (a terminal, or the next line of a pipe)."""
    return await LineReader.standard().ask(question)


# --------------------------------------------------------------------------- interrupts


async def decide(interrupt: Mapping[str, Any], ask: Ask, out: TextIO) -> dict[str, Any]:
    """The ``resume`` entry answering one interrupt, from the person's replies: an approval, a server's form,
    or a URL to visit (refused unless it is safe to open: see :func:`~yao_actors.untrusted.urls.url_refusal`). :class:`NoAnswer` when the
    input ended."""
    entry = {"interruptId": interrupt["id"], "status": "resolved"}
    reason = interrupt.get("reason")
    if reason in ("url_required", "authorization_required"):
        url = str(interrupt.get("url") or (interrupt.get("metadata") or {}).get("url") or "")
        if refusal := url_refusal(url):
            out.write(f"✗ {interrupt.get('message') or 'a server asks you to open a link'}: not opened, {refusal}\n")
            return entry | {"payload": {"action": "decline"}}
        done = _yes(await _asked(ask, f"{interrupt.get('message')}: open {url} — done?"))
        return entry | {"payload": {"action": "accept" if done else "decline"}}
    if reason == "input_required":
        out.write(f"? {interrupt.get('message')} (a form: /decline or /cancel answers it so)\n")
        out.flush()
        try:
            content = await fill_form(interrupt.get("responseSchema") or {}, ask)
        except FormAnswered as answered:
            return entry | {"payload": {"action": answered.action}}
        return entry | {"payload": {"action": "accept", "content": content}}
    reply = await _asked(ask, str(interrupt.get("message") or f"Approve {interrupt.get('toolCallId')}?"))
    return entry | {"payload": {"approved": _yes(reply)}}


def waiting_line(interrupt: Mapping[str, Any]) -> str:
    """An interrupt nobody answered, as a line: what it waits for."""
    reason = interrupt.get("reason", "tool_approval")
    link = f" ({interrupt['url']})" if interrupt.get("url") and not url_refusal(str(interrupt["url"])) else ""
    return f"⏸ waiting [{reason}]: {interrupt.get('message', '')}{link}"


async def _asked(ask: Ask, question: str) -> str:
    reply = await ask(question)
    if reply is None:
        raise NoAnswer(question)
    return reply


def _yes(reply: str) -> bool:
    return reply.strip().lower() in ("y", "yes")


# --------------------------------------------------------------------------- forms


async def fill_form(schema: Mapping[str, Any], ask: Ask) -> dict[str, Any]:
    """A server's form asked field by field (see :func:`ask_field`); the fields left out are not in the answer."""
    required = set(schema.get("required") or ())
    content: dict[str, Any] = {}
    for name, field in (schema.get("properties") or {}).items():
        value = await ask_field(name, field, ask, required=name in required)
        if value is not OMITTED:
            content[name] = value
    return content


#: What :func:`ask_field` returns for an optional field left empty (and without a default).
OMITTED: Final = object()


async def ask_field(name: str, field: Mapping[str, Any], ask: Ask, *, required: bool) -> Any:
    """Ask one form field: its title (else ``name``), description, kind and default; the reply read as the
    field's value (:func:`field_value`), asked again with the reason when it does not fit, sent as typed after
    :data:`FIELD_TRIES` tries. Empty: the default, else :data:`OMITTED` when optional. :class:`FormAnswered`
    for ``/decline`` or ``/cancel``, :class:`NoAnswer` when the input ended."""
    question = field_question(name, field, required=required)
    problem = ""
    reply = ""
    for _ in range(FIELD_TRIES):
        reply = (await _asked(ask, f"{question}{problem}")).strip()
        if reply.lower() in FORM_ACTIONS:
            raise FormAnswered(FORM_ACTIONS[reply.lower()])
        if not reply:
            if "default" in field:
                return field["default"]
            if not required:
                return OMITTED
            problem = " (required)"
            continue
        try:
            return field_value(field, reply)
        except ValueError as error:
            problem = f" ({error})"
    return reply


def field_question(name: str, field: Mapping[str, Any], *, required: bool) -> str:
    """The line that asks for a field: ``  Title (description) [kind, choices, optional, default: x]``."""
    label = field.get("title") or name
    about = f" ({field['description']})" if field.get("description") else ""
    hints = [_kind_hint(field)]
    if not required:
        hints.append("optional")
    if "default" in field:
        hints.append(f"default: {_shown_default(field)}")
    return f"  {label}{about} [{', '.join(hints)}]"


def _kind_hint(field: Mapping[str, Any]) -> str:
    choices = field_choices(field)
    if choices is not None:
        listed = "/".join(title for _, title in choices)
        return f"one or more of {listed}, comma-separated" if field.get("type") == "array" else listed
    kind = str(field.get("type", "string"))
    if kind == "boolean":
        return "y/n"
    if kind in ("number", "integer"):
        low, high = field.get("minimum"), field.get("maximum")
        bounds = (
            f" {low if low is not None else ''}..{high if high is not None else ''}"
            if (low, high) != (None, None)
            else ""
        )
        return kind + bounds
    return str(field.get("format") or kind)


def _shown_default(field: Mapping[str, Any]) -> str:
    default = field["default"]
    titles = dict(field_choices(field) or ())
    if isinstance(default, list):
        return ", ".join(str(titles.get(v, v)) for v in default)
    if isinstance(default, bool):
        return "y" if default else "n"
    return str(titles.get(default, default))


def field_choices(field: Mapping[str, Any]) -> list[tuple[Any, str]] | None:
    """``(value, title)`` of each choice of an enum, a titled enum or a multi-select; ``None`` for other fields."""
    source = field.get("items") if field.get("type") == "array" else field
    if not isinstance(source, Mapping):
        return None
    if isinstance(source.get("enum"), list):
        names = field.get("enumNames") if isinstance(field.get("enumNames"), list) else None
        return [(v, str(names[i]) if names and i < len(names) else str(v)) for i, v in enumerate(source["enum"])]
    titled = source.get("oneOf") or source.get("anyOf")
    if isinstance(titled, list) and all(isinstance(c, Mapping) and "const" in c for c in titled):
        return [(c["const"], str(c.get("title") or c["const"])) for c in titled]
    return None


def field_value(field: Mapping[str, Any], reply: str) -> Any:
    """``reply`` as the value of ``field``; ``ValueError`` saying why it does not fit."""
    choices = field_choices(field)
    if choices is not None and field.get("type") == "array":
        picked = [_choice(choices, part.strip()) for part in reply.split(",") if part.strip()]
        low, high = field.get("minItems"), field.get("maxItems")
        if (low is not None and len(picked) < low) or (high is not None and len(picked) > high):
            raise ValueError(f"pick {low or 0} to {high if high is not None else len(choices)}")
        return picked
    if choices is not None:
        return _choice(choices, reply)
    kind = field.get("type", "string")
    if kind == "boolean":
        if reply.lower() not in ("y", "yes", "true", "n", "no", "false"):
            raise ValueError("y or n")
        return reply.lower() in ("y", "yes", "true")
    if kind in ("integer", "number"):
        return _number(field, reply, int if kind == "integer" else float)
    return _text(field, reply)


def _choice(choices: Sequence[tuple[Any, str]], reply: str) -> Any:
    """The choice whose value or title is ``reply`` (or whose number in the list it is)."""
    for value, title in choices:
        if reply in (str(value), title) or reply.lower() == title.lower():
            return value
    if reply.isdigit() and 1 <= int(reply) <= len(choices):
        return choices[int(reply) - 1][0]
    raise ValueError(f"one of {', '.join(title for _, title in choices)}")


def _number(field: Mapping[str, Any], reply: str, kind: type[int] | type[float]) -> int | float:
    try:
        value = kind(reply)
    except ValueError:
        raise ValueError("a whole number" if kind is int else "a number") from None
    if field.get("minimum") is not None and value < field["minimum"]:
        raise ValueError(f"at least {field['minimum']}")
    if field.get("maximum") is not None and value > field["maximum"]:
        raise ValueError(f"at most {field['maximum']}")
    return value


def _text(field: Mapping[str, Any], reply: str) -> str:
    if field.get("minLength") is not None and len(reply) < field["minLength"]:
        raise ValueError(f"at least {field['minLength']} characters")
    if field.get("maxLength") is not None and len(reply) > field["maxLength"]:
        raise ValueError(f"at most {field['maxLength']} characters")
    kind = field.get("format")
    try:
        if kind == "date":
            datetime.date.fromisoformat(reply)
        elif kind == "date-time":
            datetime.datetime.fromisoformat(reply)
    except ValueError:
        raise ValueError(f"a {kind} such as 2027-01-02{'T09:30:00Z' if kind == 'date-time' else ''}") from None
    if kind == "email" and ("@" not in reply or reply.startswith("@") or reply.endswith("@")):
        raise ValueError("an email address")
    if kind == "uri" and not urlsplit(reply).scheme:
        raise ValueError("a URI with its scheme, such as https://...")
    return reply
