"""What ``yao-actors chat`` asks on a terminal: links it declines (the rule for which links may be offered is
tests/test_untrusted_urls.py), form fields of every kind MCP's elicitation allows read from typed replies, and the
resume entries the replies make."""

from __future__ import annotations

import io
from typing import Any

import pytest

from yao_actors.cli.terminal_questions import (
    OMITTED,
    FormAnswered,
    NoAnswer,
    ask_field,
    decide,
    field_value,
)


def replies(*given: str | None) -> tuple[Any, list[str]]:
    """An ``Ask`` answering ``given`` in turn, and the questions it was asked."""
    asked: list[str] = []
    queue = list(given)

    async def ask(question: str) -> str | None:
        asked.append(question)
        return queue.pop(0)

    return ask, asked


async def test_a_link_with_another_scheme_is_declined_without_asking() -> None:
    ask, asked = replies()
    out = io.StringIO()
    interrupt = {"id": "i1", "reason": "url_required", "message": "Pay here", "url": "javascript:alert(1)"}
    entry = await decide(interrupt, ask, out)
    assert entry == {"interruptId": "i1", "status": "resolved", "payload": {"action": "decline"}}
    assert asked == []
    assert (
        out.getvalue()
        == "✗ Pay here: not opened, only https: URLs (and http: to this machine) are opened, not javascript:\n"
    )


async def test_a_form_answered_with_a_typed_value_is_accepted_and_decline_answers_the_whole_form() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    interrupt = {"id": "i2", "reason": "input_required", "message": "Who?", "responseSchema": schema}
    ask, _ = replies("Ann")
    assert (await decide(interrupt, ask, io.StringIO()))["payload"] == {"action": "accept", "content": {"name": "Ann"}}
    ask, _ = replies("/decline")
    assert (await decide(interrupt, ask, io.StringIO()))["payload"] == {"action": "decline"}
    ask, _ = replies(None)
    with pytest.raises(NoAnswer):
        await decide(interrupt, ask, io.StringIO())


@pytest.mark.parametrize(
    ("field", "reply", "value"),
    [
        ({"type": "string", "format": "email"}, "ann@example.com", "ann@example.com"),
        ({"type": "string", "format": "date"}, "2027-01-02", "2027-01-02"),
        ({"type": "string", "format": "date-time"}, "2027-01-02T09:30:00Z", "2027-01-02T09:30:00Z"),
        ({"type": "string", "format": "uri"}, "https://a.example", "https://a.example"),
        ({"type": "integer", "minimum": 1, "maximum": 100}, "7", 7),
        ({"type": "number", "minimum": 0}, "2.5", 2.5),
        ({"type": "boolean"}, "n", False),
        ({"type": "string", "enum": ["Red", "Blue"]}, "blue", "Blue"),
        ({"type": "string", "enum": ["p-1", "p-2"], "enumNames": ["Cats", "Dogs"]}, "Dogs", "p-2"),
        (
            {"type": "string", "oneOf": [{"const": "h-1", "title": "Superman"}, {"const": "h-2", "title": "Wonder"}]},
            "2",
            "h-2",
        ),
        (
            {"type": "array", "items": {"type": "string", "enum": ["Guitar", "Piano"]}},
            "Piano, Guitar",
            ["Piano", "Guitar"],
        ),
        (
            {
                "type": "array",
                "items": {"anyOf": [{"const": "f-1", "title": "Tuna"}, {"const": "f-2", "title": "Trout"}]},
            },
            "Trout",
            ["f-2"],
        ),
    ],
)
def test_a_reply_becomes_the_fields_value(field: dict[str, Any], reply: str, value: Any) -> None:
    assert field_value(field, reply) == value


@pytest.mark.parametrize(
    ("field", "reply", "why"),
    [
        ({"type": "string", "format": "email"}, "ann", "an email address"),
        ({"type": "string", "format": "date"}, "tomorrow", "a date such as 2027-01-02"),
        ({"type": "string", "minLength": 3}, "ab", "at least 3 characters"),
        ({"type": "integer", "maximum": 100}, "101", "at most 100"),
        ({"type": "integer"}, "1.5", "a whole number"),
        ({"type": "boolean"}, "maybe", "y or n"),
        ({"type": "string", "enum": ["Red", "Blue"]}, "Green", "one of Red, Blue"),
        ({"type": "array", "minItems": 1, "maxItems": 1, "items": {"enum": ["a", "b"]}}, "a, b", "pick 1 to 1"),
    ],
)
def test_a_reply_that_does_not_fit_says_why(field: dict[str, Any], reply: str, why: str) -> None:
    with pytest.raises(ValueError, match=f"^{why}$"):
        field_value(field, reply)


async def test_an_empty_reply_takes_the_default_or_leaves_an_optional_field_out() -> None:
    ask, asked = replies("", "", "", "x")
    multi = {"type": "array", "items": {"enum": ["a", "b"]}, "default": ["b"]}
    assert await ask_field("m", multi, ask, required=False) == ["b"]
    assert await ask_field("o", {"type": "string"}, ask, required=False) is OMITTED
    assert await ask_field("r", {"type": "string"}, ask, required=True) == "x"
    assert asked[0] == "  m [one or more of a/b, comma-separated, optional, default: b]"
    assert asked[3] == "  r [string] (required)"
    ask, _ = replies("/cancel")
    with pytest.raises(FormAnswered, match="cancel"):
        await ask_field("r", {"type": "string"}, ask, required=True)
