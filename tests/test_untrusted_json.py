"""Untrusted JSON: nesting bounded, lone surrogates replaced, serialisation always UTF-8."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yao_actors.untrusted import json as untrusted_json
from yao_actors.untrusted.json import MAX_DEPTH, JSONTooDeep, dumps_utf8, loads, nesting_depth, scrub_text


def _nested(depth: int, opener: str = "[", closer: str = "]") -> str:
    return opener * depth + closer * depth


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ("[]", 1),
        ('[{"a": [1]}, [2]]', 3),
        ('["[[[[[[", "{{{{"]', 1),
        ('["\\"[[[["]', 1),
        (_nested(500), 500),
    ],
    ids=["scalar", "empty", "mixed", "brackets-in-strings", "escaped-quote", "deep"],
)
def test_nesting_depth_counts_brackets_outside_strings(text: str, depth: int) -> None:
    assert nesting_depth(text) == depth


@pytest.mark.parametrize(
    "text",
    [_nested(1000), _nested(100_000), '{"a":' * 5000 + "1" + "}" * 5000, "[" * 2000],
    ids=["arrays", "very-deep", "objects", "unterminated"],
)
def test_deep_text_is_refused_with_a_value_error(text: str) -> None:
    with pytest.raises(JSONTooDeep, match=f"deeper than {MAX_DEPTH}"):
        loads(text)


def test_nesting_at_the_limit_is_read() -> None:
    assert loads(_nested(MAX_DEPTH)) is not None


def test_wide_text_with_many_brackets_is_not_deep() -> None:
    value = [[i] for i in range(10_000)]
    assert loads(json.dumps(value)) == value


def test_too_many_digits_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="digits"):
        loads("1" * 5000)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused_where_asked_anywhere_in_the_text(constant: str) -> None:
    text = f'{{"a": [1, {{"b": {constant}}}]}}'
    with pytest.raises(untrusted_json.JSONNotFinite, match=f"^{constant} is not a JSON number"):
        untrusted_json.loads(text, allow_nan=False)
    assert isinstance(untrusted_json.loads(text)["a"][1]["b"], float)  # read as Python's json reads it otherwise
    assert untrusted_json.loads('{"text": "NaN"}', allow_nan=False) == {"text": "NaN"}  # a string is a string


def test_lone_surrogates_become_replacement_characters_in_keys_and_values() -> None:
    value = loads('{"k\\ud800": ["\\udfff", "ok \\ud83d\\ude00"]}')
    assert value == {"k\ufffd": ["\ufffd", "ok \U0001f600"]}
    assert json.dumps(value, ensure_ascii=False).encode("utf-8")


def test_scrub_text_keeps_good_text_as_is() -> None:
    text = "plain ünïcode 😀"
    assert scrub_text(text) is text
    assert scrub_text("a\ud800b\udc00") == "a\ufffdb\ufffd"


def test_dumps_utf8_replaces_surrogates_anywhere() -> None:
    assert dumps_utf8({"content": "x\ud800", "k\udfff": 1}) == '{"content":"x\ufffd","k\ufffd":1}'.encode()
    assert dumps_utf8({"a": "é"}) == '{"a":"é"}'.encode()


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(_json_values)
def test_any_json_value_round_trips_and_serialises_as_utf8(value: Any) -> None:
    text = json.dumps(value)  # ensure_ascii: surrogates travel as escapes, as from a hostile endpoint
    parsed = loads(text)
    encoded = dumps_utf8(parsed)
    assert json.loads(encoded.decode("utf-8")) == parsed
    if "\\ud" not in text.lower():
        assert parsed == value


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from('[]{}",:1\\ ud80a'), max_size=400))
def test_any_text_parses_or_raises_a_value_error(text: str) -> None:
    try:
        value = loads(text)
    except ValueError:
        return
    dumps_utf8(value)
    assert untrusted_json.nesting_depth(text) <= MAX_DEPTH


@pytest.mark.parametrize(
    ("text", "named"),
    [("[1, 2]", "a list"), ('"x"', "a string"), ("3", "the number 3"), ("null", "null"), ("true", "a boolean")],
)
def test_loads_object_names_what_the_text_holds_instead_of_an_object(text: str, named: str) -> None:
    with pytest.raises(untrusted_json.JSONNotObject, match=f"^expected a JSON object, got {named}$"):
        untrusted_json.loads_object(text)


def test_loads_object_reads_an_object_and_refuses_bad_text_as_loads_does() -> None:
    assert untrusted_json.loads_object('{"a": [1]}') == {"a": [1]}
    with pytest.raises(ValueError, match="Expecting property name") as refused:
        untrusted_json.loads_object("{]")
    assert not isinstance(refused.value, untrusted_json.JSONNotObject)
    with pytest.raises(JSONTooDeep):
        untrusted_json.loads_object(_nested(MAX_DEPTH + 1, "{", "}"))
    with pytest.raises(untrusted_json.JSONNotFinite):
        untrusted_json.loads_object('{"a": NaN}', allow_nan=False)
