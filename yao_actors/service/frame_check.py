"""A fast yes for well-formed frames: JSON schemas compiled to plain predicates that never say yes wrongly.

``jsonschema`` walks a frame with a generic validator (about 300 Python calls for a small ``run`` frame); the
front end only needs it to explain what is wrong with a bad frame. :func:`compile_check` turns a schema into a
predicate built from closures, which is ``True`` only for an instance the schema accepts. It may say ``False``
for an instance the schema accepts too (it is stricter where that keeps it simple: ``integer`` means a Python
``int``, ``const`` and ``enum`` only hold strings), so ``False`` means "ask ``jsonschema``", which then says what
and where (:func:`~yao_actors.service.protocol.parse_frame`). Bad frames therefore get exactly the messages they
always got; good ones skip the walk.

Only the keywords the frame schemas use are compiled; a schema with any other keyword compiles to a predicate
that is always ``False`` (so everything goes to ``jsonschema``). ``tests/service/test_frame_check.py`` checks
the promise on generated frames: whatever the predicate accepts, ``jsonschema`` accepts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[Any], bool]

_TYPES: dict[str, Check] = {
    "object": lambda value: type(value) is dict,
    "array": lambda value: type(value) is list,
    "string": lambda value: type(value) is str,
    "integer": lambda value: type(value) is int,
}
_KNOWN = frozenset(
    {
        "type", "required", "properties", "additionalProperties", "const", "enum", "minLength", "maxLength",
        "pattern", "items", "minItems", "maxItems", "minimum", "maximum", "if", "then", "anyOf",
    }
)  # fmt: skip


def _never(_: Any) -> bool:
    return False


def _always(_: Any) -> bool:
    return True


def compile_check(schema: Mapping[str, Any]) -> Check:
    """A predicate that is ``True`` only for instances ``schema`` accepts (``False``: ask ``jsonschema``)."""
    checks = _compile(schema)
    if checks is None:
        return _never
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    every = tuple(checks)
    return lambda value: all(check(value) for check in every)


def _compile(schema: Mapping[str, Any]) -> list[Check] | None:
    """The checks of one schema (all must hold), or ``None`` if it uses a keyword not compiled here."""
    if not _KNOWN.issuperset(schema) or ("then" in schema and "if" not in schema):
        return None
    checks: list[Check] = []
    if "type" in schema:
        type_check = _TYPES.get(schema["type"]) if isinstance(schema["type"], str) else None
        if type_check is None:
            return None
        checks.append(type_check)
    builders: tuple[tuple[tuple[str, ...], Callable[[str], Check | None]], ...] = (
        (("required", "properties", "additionalProperties"), lambda keyword: _object_keyword(keyword, schema)),
        (("const", "enum", "minLength", "maxLength", "pattern"), lambda k: _string_keyword(k, schema[k])),
        (("items", "minItems", "maxItems", "minimum", "maximum"), lambda k: _sized_keyword(k, schema[k])),
    )
    for keywords, build in builders:
        for keyword in keywords:
            if keyword in schema:
                check = build(keyword)
                if check is None:
                    return None
                checks.append(check)
    if "if" in schema:
        check = _if_then(schema["if"], schema.get("then", {}))
        if check is None:
            return None
        checks.append(check)
    if "anyOf" in schema:
        branches = [compile_check(branch) for branch in schema["anyOf"]]
        checks.append(lambda value: any(branch(value) for branch in branches))
    return checks


def _object_keyword(keyword: str, schema: Mapping[str, Any]) -> Check | None:
    """``required``, ``properties`` or ``additionalProperties: false`` (each holds for anything not an object)."""
    if keyword == "required":
        required = tuple(schema["required"])
        return lambda value: type(value) is not dict or all(key in value for key in required)
    if keyword == "properties":
        properties = {name: compile_check(sub) for name, sub in schema["properties"].items()}
        return lambda value: (
            type(value) is not dict or all(check(value[name]) for name, check in properties.items() if name in value)
        )
    if schema["additionalProperties"] is not False:
        return None
    allowed = frozenset(schema.get("properties", {}))
    return lambda value: type(value) is not dict or allowed.issuperset(value)


def _string_keyword(keyword: str, argument: Any) -> Check | None:
    """``const`` and ``enum`` of strings only; ``minLength``, ``maxLength``, ``pattern`` (hold for non-strings)."""
    if keyword == "const":
        if type(argument) is not str:
            return None
        return lambda value: type(value) is str and value == argument
    if keyword == "enum":
        if not all(type(choice) is str for choice in argument):
            return None
        choices = frozenset(argument)
        return lambda value: type(value) is str and value in choices
    if keyword == "pattern":
        search = re.compile(argument).search  # what jsonschema does: re.search
        return lambda value: type(value) is not str or search(value) is not None
    if keyword == "minLength":
        return lambda value: type(value) is not str or len(value) >= argument
    return lambda value: type(value) is not str or len(value) <= argument


def _sized_keyword(keyword: str, argument: Any) -> Check | None:
    """``items`` (one schema), ``minItems``, ``maxItems`` (hold for non-arrays); ``minimum``, ``maximum``."""
    if keyword == "items":
        if not isinstance(argument, Mapping):
            return None
        item = compile_check(argument)
        return lambda value: type(value) is not list or all(item(element) for element in value)
    if keyword == "minItems":
        return lambda value: type(value) is not list or len(value) >= argument
    if keyword == "maxItems":
        return lambda value: type(value) is not list or len(value) <= argument
    # minimum / maximum: an int is checked; any other number is left to jsonschema; non-numbers hold.
    if keyword == "minimum":
        return lambda value: (type(value) is int and value >= argument) or not isinstance(value, int | float)
    return lambda value: (type(value) is int and value <= argument) or not isinstance(value, int | float)


def _if_then(condition: Mapping[str, Any], then: Mapping[str, Any]) -> Check | None:
    """``if``/``then`` where ``if`` is ``{"properties": {name: {"const": string}}}``, decided exactly.

    ``then`` must hold whenever ``if`` does: ``if`` holds for anything but an object whose ``name`` is present
    and not that string.
    """
    properties = condition.get("properties")
    if set(condition) != {"properties"} or not isinstance(properties, Mapping) or len(properties) != 1:
        return None
    ((name, sub),) = properties.items()
    if set(sub) != {"const"} or type(sub["const"]) is not str:
        return None
    expected = sub["const"]
    then_check = compile_check(then)

    def check(value: Any) -> bool:
        condition_holds = type(value) is not dict or name not in value or value[name] == expected
        return not condition_holds or then_check(value)

    return check
