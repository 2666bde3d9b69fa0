"""Argument parsing, repair and schema validation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from yao_actors import arguments
from yao_actors.arguments import check_arguments, compiled_validator, parse_arguments

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
