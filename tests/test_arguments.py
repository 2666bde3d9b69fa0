"""Argument parsing, repair and schema validation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yao_actors.tools import arguments
from yao_actors.tools.arguments import check_arguments, parse_arguments
from yao_actors.tools.schema_check import TYPES, compile_check, never
from yao_actors.tools.schema_gate import compiled_validator, schema_problems

WEATHER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Beijing", "Shanghai"]},
        "days": {"type": "integer", "minimum": 1},
        "hours": {"type": "array", "items": {"type": "object", "properties": {"at": {"type": "integer"}}}},
    },
    "required": ["city"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("raw", ["", "   ", "\n"])
def test_empty_text_is_an_empty_object(raw: str) -> None:
    assert parse_arguments(raw) == arguments.Arguments({})


def test_strict_json_is_not_marked_repaired() -> None:
    parsed = parse_arguments('{"city": "Beijing"}')
    assert parsed.value == {"city": "Beijing"}
    assert parsed.ok
    assert not parsed.repaired


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"city": "Beijing"', {"city": "Beijing"}),
        ("{city: 'Beijing'}", {"city": "Beijing"}),
        ('{"city": "Beijing",}', {"city": "Beijing"}),
        ('{"city": "Bei', {"city": "Bei"}),
    ],
)
def test_malformed_json_is_repaired_and_says_so(raw: str, expected: dict[str, Any]) -> None:
    parsed = parse_arguments(raw)
    assert parsed.value == expected
    assert parsed.repaired


@pytest.mark.parametrize("raw", ["garbage", "12 abc", '"unterminated'])
def test_garbage_is_invalid(raw: str) -> None:
    parsed = parse_arguments(raw)
    assert parsed.value is None
    assert parsed.error is not None
    assert "not valid JSON" in parsed.error


@pytest.mark.parametrize(
    ("raw", "kind"),
    [("[1]", "array"), ('"s"', "string"), ("1.5", "number"), ("true", "boolean"), ("null", "null")],
)
def test_the_value_must_be_an_object(raw: str, kind: str) -> None:
    parsed = parse_arguments(raw)
    assert parsed.value is None
    assert parsed.problems == (f"arguments must be a JSON object, got {kind}",)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_invalid_arguments_not_repaired(constant: str) -> None:
    """A tool would get ``null`` for them (what a JSON encoder makes of them): refused like invalid JSON."""
    parsed = check_arguments(
        f'{{"a": {constant}, "b": 1}}', {"type": "object", "properties": {"a": {"type": "number"}}}
    )
    assert parsed.value is None
    assert (
        parsed.error == f"invalid arguments: not usable JSON ({constant} is not a JSON number; numbers must be finite)"
    )
    assert not parsed.repaired


def test_a_repair_that_gives_no_object_says_the_json_was_invalid() -> None:
    parsed = parse_arguments("{bad")
    assert parsed.value is None
    assert parsed.repaired
    (problem,) = parsed.problems
    assert problem.startswith("not valid JSON (Expecting property name enclosed in double quotes at line 1 column 2)")
    assert problem.endswith("and repairing it did not give a JSON object (it gave array)")
    assert "must be a JSON object" not in problem


def test_valid_arguments_pass_the_schema() -> None:
    checked = check_arguments('{"city": "Beijing", "days": 2}', WEATHER)
    assert checked.ok
    assert checked.value == {"city": "Beijing", "days": 2}


def test_a_message_names_the_field_and_the_rule() -> None:
    checked = check_arguments('{"city": "x"}', WEATHER)
    assert checked.value is None
    assert checked.problems == ("city: 'x' is not one of ['Beijing', 'Shanghai']",)
    assert checked.error == "invalid arguments: city: 'x' is not one of ['Beijing', 'Shanghai']"


def test_every_problem_is_listed_in_a_stable_order() -> None:
    raw = '{"days": 0, "hours": [{"at": "noon"}], "city": 5, "extra": 1}'
    expected = (
        "Additional properties are not allowed ('extra' was unexpected)",
        "city: 5 is not of type 'string'",
        "city: 5 is not one of ['Beijing', 'Shanghai']",
        "days: 0 is less than the minimum of 1",
        "hours[0].at: 'noon' is not of type 'integer'",
    )
    assert check_arguments(raw, WEATHER).problems == expected
    reordered = '{"extra": 1, "city": 5, "hours": [{"at": "noon"}], "days": 0}'
    assert check_arguments(reordered, WEATHER).problems == expected


def test_empty_arguments_are_validated_too() -> None:
    assert check_arguments("", WEATHER).problems == ("'city' is a required property",)


def test_repaired_arguments_are_validated_and_keep_the_mark() -> None:
    checked = check_arguments('{"city": "Bei', WEATHER)
    assert checked.repaired
    assert checked.problems == ("city: 'Bei' is not one of ['Beijing', 'Shanghai']",)


def test_no_schema_means_no_validation() -> None:
    assert check_arguments('{"anything": 1}', None).value == {"anything": 1}
    assert check_arguments('{"anything": 1}', {}).value == {"anything": 1}


def test_an_invalid_schema_leaves_judgement_to_the_server() -> None:
    assert check_arguments('{"a": 1}', {"type": 12}).value == {"a": 1}


def test_one_compiled_validator_per_schema() -> None:
    same_schema_other_key_order = dict(reversed(list(WEATHER.items())))
    first = compiled_validator(WEATHER)
    assert first is not None
    assert compiled_validator(same_schema_other_key_order) is first
    assert compiled_validator({"type": "object"}) is not first


@pytest.mark.parametrize(
    "raw",
    [
        "[" * 1000 + "]" * 1000,  # strict JSON that json.loads cannot read (RecursionError)
        '{"a":' * 3000 + "1" + "}" * 3000,
        "[" * 5000,  # malformed: json_repair would recurse into it
        '{"a": ' + "[" * 2000 + "1",
    ],
    ids=["arrays", "objects", "unterminated", "unterminated-in-object"],
)
def test_deeply_nested_arguments_are_invalid_not_a_crash(raw: str) -> None:
    parsed = check_arguments(raw, WEATHER)
    assert parsed.value is None
    assert parsed.error is not None
    assert "nested deeper than" in parsed.error


def test_an_integer_with_too_many_digits_is_invalid() -> None:
    parsed = parse_arguments('{"days": ' + "9" * 5000 + "}")
    assert parsed.value is None
    assert parsed.error is not None
    assert "digits" in parsed.error


@pytest.mark.parametrize("raw", ['{"city": "\\ud800"}', '{"city": "\\ud800"'])
def test_lone_surrogates_in_arguments_become_replacement_characters(raw: str) -> None:
    parsed = parse_arguments(raw)
    assert parsed.value == {"city": "\ufffd"}
    assert json.dumps(parsed.value, ensure_ascii=False).encode("utf-8")


# --------------------------------------------------------------------------- the plain check of flat object schemas

#: What an MCP SDK generates from ``def echo(text: str, times: int = 1, loud: bool | None = None)``-like signatures.
FLAT: dict[str, Any] = {
    "type": "object",
    "title": "echoArguments",
    "properties": {
        "text": {"type": "string", "title": "Text"},
        "times": {"type": "integer", "title": "Times", "default": 1},
        "ratio": {"type": "number"},
        "loud": {"type": "boolean", "description": "shout"},
        "tags": {"type": "array"},
        "extra": {"type": "object"},
        "nothing": {"type": "null"},
        "anything": {"title": "Anything"},
    },
    "required": ["text"],
}


def test_a_schema_of_the_compiled_keywords_gets_a_plain_check_and_any_other_keyword_does_not() -> None:
    assert compile_check(FLAT) is not never
    assert compile_check({"type": "object"}) is not never
    assert compile_check(WEATHER)({"city": "Beijing", "days": 2, "hours": [{"at": 3}]})  # enum, minimum, items
    assert compile_check({**FLAT, "$schema": "http://json-schema.org/draft-04/schema#"}) is never
    assert compile_check({"type": "object", "additionalProperties": {"type": "string"}}) is never
    # A property whose schema is not compiled: only objects that have it go to jsonschema.
    for uncompiled in ({"type": ["string", "null"]}, {"$ref": "#/$defs/A"}):
        check = compile_check({"type": "object", "properties": {"a": uncompiled}})
        assert check({"b": 1})
        assert not check({"a": "x"})


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"text": "北京"}, None),
        ({"text": "x", "times": 2, "ratio": 0.5, "loud": True, "tags": [1], "extra": {}, "nothing": None}, None),
        ({"text": "x", "times": 2.0}, None),  # jsonschema's integer takes 2.0: the plain check leaves it to it
        ({"text": "x", "undeclared": 1}, None),
        ({}, "'text' is a required property"),
        ({"text": 1}, "text: 1 is not of type 'string'"),
        ({"text": "x", "times": True}, "times: True is not of type 'integer'"),
        ({"text": "x", "times": 2.5}, "times: 2.5 is not of type 'integer'"),
        ({"text": "x", "ratio": False}, "ratio: False is not of type 'number'"),
        ({"text": "x", "tags": {}}, "tags: {} is not of type 'array'"),
    ],
)
def test_the_plain_check_gives_the_same_answers_and_jsonschema_words_the_problems(
    value: dict[str, Any], problem: str | None
) -> None:
    checked = check_arguments(json.dumps(value, ensure_ascii=False), FLAT)
    assert checked.problems == (() if problem is None else (problem,))
    assert checked.value == (value if problem is None else None)


def test_a_closed_flat_schema_refuses_undeclared_properties() -> None:
    closed = {**FLAT, "additionalProperties": False}
    assert compile_check(closed) is not never
    assert check_arguments('{"text": "x"}', closed).ok
    problems = check_arguments('{"text": "x", "undeclared": 1}', closed).problems
    assert len(problems) == 1
    assert "'undeclared' was unexpected" in problems[0]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2),
    max_leaves=4,
)
PROPERTY_NAMES = st.sampled_from(["a", "b", "c"])
PROPERTY = st.fixed_dictionaries({}, optional={"type": st.sampled_from(sorted(TYPES)), "title": st.text(max_size=2)})
FLAT_SCHEMAS = st.fixed_dictionaries(
    {"type": st.just("object")},
    optional={
        "properties": st.dictionaries(PROPERTY_NAMES, PROPERTY, max_size=3),
        "required": st.lists(PROPERTY_NAMES, max_size=3, unique=True),
        "additionalProperties": st.booleans(),
        "title": st.text(max_size=2),
    },
)


@given(schema=FLAT_SCHEMAS, value=st.dictionaries(PROPERTY_NAMES | st.text(max_size=2), JSON_VALUES, max_size=4))
@settings(max_examples=400, deadline=None)
def test_the_plain_check_never_accepts_what_jsonschema_rejects(schema: dict[str, Any], value: dict[str, Any]) -> None:
    check = compile_check(schema)
    validator = compiled_validator(schema)
    assert check is not never
    assert validator is not None
    if check(value):
        assert validator.is_valid(value)
    # and the problems check_arguments reports are jsonschema's own, whichever way it went
    # a flat schema's errors are about the object or one of its properties: paths of at most one name
    errors = list(validator.iter_errors(value))
    expected = sorted(f"{e.absolute_path[0]}: {e.message}" if e.absolute_path else e.message for e in errors)
    assert sorted(schema_problems(value, schema)) == expected
