"""What a server may ask the user: MCP's flat questions of primitive fields, and the defaults an answer carries.

A question (``requestedSchema``) is an object of flat fields — strings, numbers, booleans, or a list of choices —
and nothing that nests or refers (:func:`question_problem` says why one is not). An answer sent back has every
field the user left out filled with its ``default`` (:func:`fill_defaults`). Whether an answer fits its question
is checked by the schema gate (:func:`~yao_actors.tools.schema_gate.answer_problem`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

#: At most this many characters of a field's bad ``type`` are shown.
_SHOWN: Final = 120
#: The keywords of a question's top level (MCP's ``requestedSchema``, and the annotations SDKs add).
_QUESTION_KEYS: Final = frozenset({"$schema", "type", "properties", "required", "title", "description"})
#: The keywords of one field of a question: MCP's string, number, boolean and enum schemas (and pattern,
#: checked on RE2); nothing that nests or refers.
_FIELD_KEYS: Final = frozenset(
    {
        "type", "title", "description", "default", "minLength", "maxLength", "format", "pattern", "minimum",
        "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "enum", "enumNames", "oneOf",
        "items", "minItems", "maxItems", "uniqueItems", "examples", "deprecated", "$comment",
    }
)  # fmt: skip
_PRIMITIVE_TYPES: Final = frozenset({"string", "number", "integer", "boolean"})
_PRIMITIVES: Final = (str, int, float, bool)


def question_problem(schema: Mapping[str, Any] | None) -> str | None:
    """Why ``schema`` is not a question MCP allows (flat primitive fields), or ``None`` when it is one."""
    if schema is None:
        return None
    if not isinstance(schema, Mapping):
        return "the requested schema is not an object"
    if schema.get("type", "object") != "object":
        return "the requested schema's type must be 'object'"
    if extra := sorted(set(schema) - _QUESTION_KEYS - {"additionalProperties"}):
        return f"the requested schema has {', '.join(map(repr, extra))}: only flat fields may be asked for"
    if not isinstance(schema.get("additionalProperties", False), bool):
        return "the requested schema's additionalProperties must be true or false"
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        return "the requested schema's properties is not an object"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        return "the requested schema's required is not a list of names"
    for name, field in properties.items():
        if (problem := _field_problem(field)) is not None:
            return f"field {name!r}: {problem}"
    return None


def _field_problem(field: Any) -> str | None:
    if not isinstance(field, Mapping):
        return "not a schema object"
    if extra := sorted(set(field) - _FIELD_KEYS):
        return f"{', '.join(map(repr, extra))} is not allowed in a question's field (only flat primitives)"
    kind = field.get("type")
    if kind == "array":
        return _choices_problem(field)
    if kind not in _PRIMITIVE_TYPES:
        return f"type {kind!r:.{_SHOWN}} is not a string, number, integer, boolean or a list of choices"
    if "items" in field:
        return "'items' belongs to a list of choices only"
    default = field.get("default")
    if default is not None and not isinstance(default, _PRIMITIVES):
        return "its default is not a string, number or boolean"
    if "oneOf" in field and not _titled_choices(field["oneOf"]):
        return "oneOf must list choices as {'const': string, 'title': string}"
    if "enum" in field and not (
        isinstance(field["enum"], list) and all(isinstance(v, _PRIMITIVES) for v in field["enum"])
    ):
        return "enum must list strings, numbers or booleans"
    return None


def _choices_problem(field: Mapping[str, Any]) -> str | None:
    """A field of ``type: "array"`` must be a multiple choice: items a string ``enum`` or ``anyOf`` of consts."""
    items = field.get("items")
    if not isinstance(items, Mapping):
        return "a list field must give its choices in 'items'"
    untitled = set(items) <= {"type", "enum"} and items.get("type") == "string"
    untitled = untitled and isinstance(items.get("enum"), list) and all(isinstance(v, str) for v in items["enum"])
    titled = set(items) == {"anyOf"} and _titled_choices(items["anyOf"])
    if not (untitled or titled):
        return "a list field's items must be a string enum, or anyOf {'const', 'title'} choices"
    default = field.get("default")
    if default is not None and not (isinstance(default, list) and all(isinstance(v, str) for v in default)):
        return "its default is not a list of strings"
    return None


def _titled_choices(choices: Any) -> bool:
    return isinstance(choices, list) and all(
        isinstance(c, Mapping) and set(c) <= {"const", "title"} and isinstance(c.get("const"), str) for c in choices
    )


def fill_defaults(content: Mapping[str, Any], schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """``content`` with every field it leaves out that has a ``default`` in ``schema`` filled with it (MCP
    SEP-1034: a client sends the defaults the user did not change)."""
    filled = dict(content)
    properties = (schema or {}).get("properties")
    if isinstance(properties, Mapping):
        for name, field in properties.items():
            if name not in filled and isinstance(field, Mapping) and field.get("default") is not None:
                filled[name] = field["default"]
    return filled
