"""A compiled schema check never accepts what jsonschema refuses, over every keyword it compiles."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from yao_actors.tools.schema_check import TYPES, compile_check, never

NAMES = st.sampled_from(["a", "b", "c"])
TEXT = st.sampled_from(["", "a", "ab", "abc", "北京", "x1"]) | st.text(max_size=3)
SCALARS = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-3, 3) | TEXT
VALUES = SCALARS | st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES | TEXT, inner, max_size=3), max_leaves=6
)
SMALL = st.integers(0, 3)
BOUND = st.integers(-2, 2) | st.sampled_from([0.5, -1.5, True])


def keywords(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """A schema of up to three keywords, mostly compiled ones, subschemas from ``inner``."""
    values: dict[str, st.SearchStrategy[Any]] = {
        "type": st.sampled_from(sorted(TYPES)),
        "required": st.lists(NAMES, max_size=3, unique=True),
        "properties": st.dictionaries(NAMES, inner, max_size=3),
        "additionalProperties": st.booleans(),
        "const": TEXT | st.integers(0, 1),
        "enum": st.lists(TEXT | st.integers(0, 1), min_size=1, max_size=3, unique=True),
        "minLength": SMALL,
        "maxLength": SMALL,
        "pattern": st.sampled_from(["^a", "b$", "[0-9]", "^$"]),
        "items": inner,
        "minItems": SMALL,
        "maxItems": SMALL,
        "minimum": BOUND,
        "maximum": BOUND,
        "anyOf": st.lists(inner, min_size=1, max_size=2),
        "title": TEXT,
        # Not compiled (or not in this form): never.
        "format": st.just("email"),
        "types": st.just(["string", "null"]),
    }
    chosen = st.lists(st.sampled_from(sorted(values)), max_size=3, unique=True)
    return chosen.flatmap(
        lambda names: st.fixed_dictionaries({("type" if n == "types" else n): values[n] for n in names})
    )


def with_if_then(schema: dict[str, Any], name: str, expected: str, then: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "if": {"properties": {name: {"const": expected}}}, "then": then}


LEAVES = st.just({}) | st.builds(lambda name: {"type": name}, st.sampled_from(sorted(TYPES))) | keywords(st.just({}))
SCHEMAS = st.recursive(LEAVES, keywords, max_leaves=5)
SCHEMAS_WITH_IF = SCHEMAS | st.builds(with_if_then, SCHEMAS, NAMES, TEXT, SCHEMAS)


@given(schema=SCHEMAS_WITH_IF, value=VALUES)
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_whatever_a_check_accepts_jsonschema_accepts(schema: dict[str, Any], value: Any) -> None:
    if compile_check(schema)(value):
        assert Draft202012Validator(schema).is_valid(value), (schema, value)


def test_a_check_accepts_the_usual_valid_instances() -> None:
    schema = {
        "type": "object",
        "title": "args",
        "properties": {
            "city": {"type": "string", "enum": ["Beijing", "Shanghai"], "description": "where"},
            "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 1},
            "ratio": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 3},
            "note": {"type": "null"},
            "loud": {"type": "boolean"},
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    check = compile_check(schema)
    assert check({"city": "Beijing", "days": 2, "ratio": 0.5, "tags": ["a"], "note": None, "loud": True})
    assert not check({"city": "Paris"})
    assert not check({"city": "Beijing", "other": 1})


def test_a_malformed_schema_compiles_to_never_without_raising() -> None:
    for schema in ({"pattern": "("}, {"required": "a"}, {"enum": [{}]}, {"minLength": "2"}, {"anyOf": {}}, True):
        assert compile_check(schema) is never
