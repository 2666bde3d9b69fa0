"""Values that satisfy a JSON Schema, chosen deterministically from a seeded generator.

``TestModel`` calls every tool it is offered with arguments made here from the
tool's ``inputSchema``. Supported: ``type`` (one or a list), ``const``,
``enum``, ``default``, objects (``properties``, ``required``; every listed
property is filled), arrays (``items``, ``minItems``/``maxItems``), strings
(``minLength``/``maxLength``), integers and numbers (``minimum``/``maximum``,
their exclusive forms, integer ``multipleOf``), booleans, ``null``,
``anyOf``/``oneOf`` (the first branch), ``allOf`` (merged), and local ``$ref``
(``#/$defs/...``, ``#/definitions/...``, as pydantic writes them). ``pattern``
and ``format`` are not honoured.
"""

from __future__ import annotations

import math
import random
import string
from collections.abc import Mapping
from typing import Any

_DEFAULT_LOW, _DEFAULT_HIGH = 0, 100


def sample_value(schema: Mapping[str, Any], rng: random.Random, root: Mapping[str, Any] | None = None) -> Any:
    """A value valid against ``schema``; ``root`` resolves ``$ref`` (defaults to ``schema``)."""
    root = schema if root is None else root
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return rng.choice(list(schema["enum"]))
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return sample_value(schema[key][0], rng, root)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged.update(_resolve(part, root))
        return sample_value(merged, rng, root)
    return _BY_TYPE[_type_of(schema)](schema, rng, root)


#: Most ``$ref`` hops followed from one schema (a reference to itself, or a cycle, is given up on: ``{}``).
_MAX_HOPS = 32


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    hops = 0
    while isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#/"):
        hops += 1
        if hops > _MAX_HOPS:
            return {}
        target: Any = root
        for part in schema["$ref"][2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _type_of(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if isinstance(kind, str):
        return kind
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return "string"


def _object(schema: Mapping[str, Any], rng: random.Random, root: Mapping[str, Any]) -> dict[str, Any]:
    properties: Mapping[str, Any] = schema.get("properties") or {}
    value = {name: sample_value(sub, rng, root) for name, sub in properties.items()}
    for name in schema.get("required") or ():
        value.setdefault(name, "x")
    return value


def _array(schema: Mapping[str, Any], rng: random.Random, root: Mapping[str, Any]) -> list[Any]:
    low = int(schema.get("minItems", 1))
    high = int(schema.get("maxItems", max(low, 2)))
    items = schema.get("items")
    item_schema: Mapping[str, Any] = items if isinstance(items, Mapping) else {}
    return [sample_value(item_schema, rng, root) for _ in range(rng.randint(low, max(low, high)))]


def _string(schema: Mapping[str, Any], rng: random.Random, _root: Mapping[str, Any]) -> str:
    low = int(schema.get("minLength", 1))
    high = int(schema.get("maxLength", max(low, 8)))
    length = rng.randint(low, max(low, min(high, low + 8)))
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(length))


def _bounds(schema: Mapping[str, Any]) -> tuple[float, float, float | None, float | None]:
    """Inclusive bounds plus the exclusive ones (which the caller must step inside)."""
    low = schema.get("minimum", -math.inf)
    high = schema.get("maximum", math.inf)
    ex_low = schema.get("exclusiveMinimum")
    ex_high = schema.get("exclusiveMaximum")
    if isinstance(ex_low, bool) or isinstance(ex_high, bool):  # draft 4 style flags
        ex_low = low if ex_low is True else None
        ex_high = high if ex_high is True else None
    return low, high, ex_low, ex_high


def _integer(schema: Mapping[str, Any], rng: random.Random, _root: Mapping[str, Any]) -> int:
    low, high, ex_low, ex_high = _bounds(schema)
    lower = max(low, math.floor(ex_low) + 1 if ex_low is not None else -math.inf)
    upper = min(high, math.ceil(ex_high) - 1 if ex_high is not None else math.inf)
    lower, upper = _finite(lower, upper)
    lower, upper = math.ceil(lower), math.floor(upper)
    step = schema.get("multipleOf")
    if isinstance(step, int) and step > 0:
        first, last = math.ceil(lower / step), math.floor(upper / step)
        return step * rng.randint(first, max(first, last))
    return rng.randint(int(lower), int(upper))


def _number(schema: Mapping[str, Any], rng: random.Random, _root: Mapping[str, Any]) -> float:
    low, high, ex_low, ex_high = _bounds(schema)
    lower, upper = _finite(
        max(low, ex_low if ex_low is not None else -math.inf), min(high, ex_high if ex_high is not None else math.inf)
    )
    value = rng.uniform(lower, upper)
    if (ex_low is not None and value <= ex_low) or (ex_high is not None and value >= ex_high):
        value = (lower + upper) / 2
    return value


def _finite(lower: float, upper: float) -> tuple[float, float]:
    """Replace missing bounds by a default window that stays inside the given ones."""
    if math.isinf(lower) and math.isinf(upper):
        return _DEFAULT_LOW, _DEFAULT_HIGH
    if math.isinf(lower):
        return upper - (_DEFAULT_HIGH - _DEFAULT_LOW), upper
    if math.isinf(upper):
        return lower, lower + (_DEFAULT_HIGH - _DEFAULT_LOW)
    return lower, upper


_BY_TYPE: dict[str, Any] = {
    "object": _object,
    "array": _array,
    "string": _string,
    "integer": _integer,
    "number": _number,
    "boolean": lambda _schema, rng, _root: rng.random() < 0.5,
    "null": lambda _schema, _rng, _root: None,
}
