"""A fast yes for valid instances: a JSON schema compiled to a plain predicate that never says yes wrongly.

``jsonschema`` walks an instance with a generic validator (hundreds of Python calls for a small object); its
users here (the front end's frames, :mod:`~yao_actors.service.protocol`; a tool call's arguments,
:mod:`~yao_actors.tools.arguments`) only need it to explain what is wrong with a bad one. :func:`compile_check`
turns a schema into a predicate built from closures, which is ``True`` only for an instance the schema
accepts. It may say ``False`` for an instance the schema accepts too (it is stricter where that keeps it
simple: ``integer`` means a Python ``int``, ``const`` and ``enum`` only hold strings, ``minimum`` and
``maximum`` only vouch for an ``int``), so ``False`` means "ask ``jsonschema``", which then says what and
where. Bad instances therefore get exactly the messages they always got; good ones skip the walk.

The keywords compiled (draft 2020-12, the default of a schema without ``$schema``): ``type`` (one name),
``required``, ``properties``, ``additionalProperties`` (``true`` or ``false``), ``const``, ``enum``,
``minLength``, ``maxLength``, ``pattern``, ``items`` (one schema), ``minItems``, ``maxItems``, ``minimum``,
``maximum``, ``if``/``then`` (``if`` one property's string ``const``), ``anyOf``, and the annotations
(``title``, ``description``, ``default``, ...), which validate nothing. A schema with any other keyword, or
with a compiled keyword in a form not compiled, is :data:`never` (everything goes to ``jsonschema``); a
property's schema that is never fails only the objects that have that property. ``pattern`` is searched for
on RE2 (:mod:`~yao_actors.tools.linear_patterns`: linear time, whoever wrote the pattern); one RE2 refuses is
not compiled. Compiling never raises, so
a tool's schema, whatever it holds, cannot fail the call. ``tests/test_arguments.py`` and
``tests/service/test_frame_check.py`` check the promise on generated instances: whatever a predicate
accepts, ``jsonschema`` accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from yao_actors.tools.linear_patterns import linear_search

Check = Callable[[Any], bool]
"""``True`` only when an instance certainly satisfies the schema; ``False``: ask ``jsonschema`` (it may pass)."""

#: What a value of each JSON type is, exactly as ``json.loads`` makes it. ``integer`` takes only ``int``
#: (jsonschema also takes ``1.0``: such values are left to it), and ``bool`` is no number.
TYPES: dict[str, Check] = {
    "string": lambda value: type(value) is str,
    "integer": lambda value: type(value) is int,
    "number": lambda value: type(value) is int or type(value) is float,
    "boolean": lambda value: type(value) is bool,
    "null": lambda value: value is None,
    "array": lambda value: type(value) is list,
    "object": lambda value: type(value) is dict,
}
#: Keywords that only annotate: jsonschema does not validate with them.
ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment"}
)
_KNOWN = ANNOTATIONS | {
    "type", "required", "properties", "additionalProperties", "const", "enum", "minLength", "maxLength",
    "pattern", "items", "minItems", "maxItems", "minimum", "maximum", "if", "then", "anyOf",
}  # fmt: skip


def never(_: Any) -> bool:
    """The check of a schema not compiled here: every instance goes to ``jsonschema``."""
    return False


def _always(_: Any) -> bool:
    return True


def compile_check(schema: Any) -> Check:
    """A predicate that is ``True`` only for instances ``schema`` accepts (``False``: ask ``jsonschema``).

    :data:`never` when ``schema`` uses a keyword, or a form of one, not compiled here.
    """
    try:
        checks = _compile(schema)
    except (TypeError, ValueError, AttributeError, RecursionError):  # a malformed schema
        checks = None
    if checks is None:
        return never
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    every = tuple(checks)
    return lambda value: all(check(value) for check in every)


def _compile(schema: Any) -> list[Check] | None:
    """The checks of one schema (all must hold), or ``None`` if it uses a keyword not compiled here."""
    if not isinstance(schema, Mapping) or not _KNOWN.issuperset(schema):
        return None
    if "then" in schema and "if" not in schema:
        return None
    checks: list[Check] = []
    if "type" in schema:
        type_check = TYPES.get(schema["type"]) if isinstance(schema["type"], str) else None
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
                if check is not _always:
                    checks.append(check)
    if "if" in schema:
        check = _if_then(schema["if"], schema.get("then", {}))
        if check is None:
            return None
        checks.append(check)
    if "anyOf" in schema:
        if not isinstance(schema["anyOf"], list):
            return None
        branches = [compile_check(branch) for branch in schema["anyOf"]]
        checks.append(lambda value: any(branch(value) for branch in branches))
    return checks


def _number(argument: Any) -> bool:
    return type(argument) is int or type(argument) is float


def _object_keyword(keyword: str, schema: Mapping[str, Any]) -> Check | None:
    """``required``, ``properties``, ``additionalProperties`` (``false``, or ``true``: nothing to check).

    Each holds for anything not an object.
    """
    if keyword == "required":
        required = schema["required"]
        if not isinstance(required, list) or not all(type(name) is str for name in required):
            return None
        needed = tuple(required)
        return lambda value: type(value) is not dict or all(key in value for key in needed)
    if keyword == "properties":
        if not isinstance(schema["properties"], Mapping):
            return None
        properties = {name: compile_check(sub) for name, sub in schema["properties"].items()}

        return lambda value: (
            type(value) is not dict or all(check(value[name]) for name, check in properties.items() if name in value)
        )
    closed = schema["additionalProperties"]
    if closed is True:
        return _always
    if closed is not False or not isinstance(schema.get("properties", {}), Mapping):
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
        if not isinstance(argument, list) or not all(type(choice) is str for choice in argument):
            return None
        choices = frozenset(argument)
        return lambda value: type(value) is str and value in choices
    if keyword == "pattern":
        if type(argument) is not str:
            return None
        search = linear_search(argument)  # a search anywhere, as jsonschema does; on RE2, whoever wrote it
        if search is None:  # a pattern RE2 refuses: not enforced (the gate says so)
            return None
        return lambda value: type(value) is not str or search(value)
    if type(argument) is not int:
        return None
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
    if keyword in ("minItems", "maxItems"):
        if type(argument) is not int:
            return None
        if keyword == "minItems":
            return lambda value: type(value) is not list or len(value) >= argument
        return lambda value: type(value) is not list or len(value) <= argument
    # minimum / maximum: an int is checked; any other number is left to jsonschema; non-numbers hold.
    if not _number(argument):
        return None
    if keyword == "minimum":
        return lambda value: (type(value) is int and value >= argument) or not isinstance(value, int | float)
    return lambda value: (type(value) is int and value <= argument) or not isinstance(value, int | float)


def _if_then(condition: Any, then: Any) -> Check | None:
    """``if``/``then`` where ``if`` is ``{"properties": {name: {"const": string}}}``, decided exactly.

    ``then`` must hold whenever ``if`` does: ``if`` holds for anything but an object whose ``name`` is present
    and not that string.
    """
    if not isinstance(condition, Mapping):
        return None
    properties = condition.get("properties")
    if set(condition) != {"properties"} or not isinstance(properties, Mapping) or len(properties) != 1:
        return None
    ((name, sub),) = properties.items()
    if not isinstance(sub, Mapping) or set(sub) != {"const"} or type(sub["const"]) is not str:
        return None
    expected = sub["const"]
    then_check = compile_check(then)

    def check(value: Any) -> bool:
        condition_holds = type(value) is not dict or name not in value or value[name] == expected
        return not condition_holds or then_check(value)

    return check
