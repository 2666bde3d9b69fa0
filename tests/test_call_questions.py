"""What ``yao-actors call`` answers to a tool's question: the form's defaults fill what the answer omits (SEP-1034)."""

from __future__ import annotations

from yao_actors.cli.call_questions import default_input
from yao_actors.tools.input_requests import InputAnswer, InputRequest
from yao_actors.tools.question_schemas import fill_defaults

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "Ada"},
        "age": {"type": "integer", "default": 36},
        "active": {"type": "boolean", "default": False},
        "status": {"type": "string", "enum": ["on", "off"], "default": "off"},
        "note": {"type": "string"},
    },
}


def test_omitted_fields_with_a_default_are_filled_and_given_ones_kept() -> None:
    assert fill_defaults({"name": "Grace", "note": "n"}, SCHEMA) == {
        "name": "Grace", "note": "n", "age": 36, "active": False, "status": "off"
    }  # fmt: skip
    assert fill_defaults({"a": 1}, None) == {"a": 1}
    assert fill_defaults({}, {"properties": {"x": "not a schema"}}) == {}


async def test_accept_defaults_accepts_a_form_with_its_defaults_and_declines_a_url() -> None:
    answer = default_input()
    form = InputRequest("s", "t", "form", "Who?", schema=SCHEMA)
    assert await answer(form) == InputAnswer("accept", {"name": "Ada", "age": 36, "active": False, "status": "off"})
    assert await answer(InputRequest("s", "t", "url", "Sign in", url="https://x.example/")) == InputAnswer("decline")
