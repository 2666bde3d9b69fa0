"""The configuration's JSON Schema (``yao_actors/config.schema.json``, draft 2020-12) and checking data against it.

The schema is published for editors and for ``yao-actors config schema``; every
configuration read (:func:`~yao_actors.config.load_config`,
:func:`~yao_actors.config.parse_config`) is checked against it as well as by the
reader, which adds what a schema cannot say (``${VAR}`` set, server references,
``type`` against ``command`` / ``url``). :func:`schema_problems` turns the
schema's errors into the reader's form: ``(key path, message)``.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import jsonschema.exceptions  # type: ignore[import-untyped]

from yao_actors.config.values import join_path, type_name

SCHEMA_FILE = "config.schema.json"

_TYPE_NAMES = {
    "object": "an object",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def schema_text() -> str:
    """The schema as the package ships it (what ``yao-actors config schema`` prints)."""
    return importlib.resources.files("yao_actors").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


@functools.cache
def config_schema() -> dict[str, Any]:
    """The configuration's JSON Schema, decoded (one object: do not change it)."""
    schema: dict[str, Any] = json.loads(schema_text())
    return schema


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(config_schema())


def schema_problems(data: Any) -> list[tuple[str, str]]:
    """Every place ``data`` breaks the schema, as ``(key path, message)``, in document order."""
    found: list[tuple[str, str]] = []
    for error in sorted(_validator().iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path]):
        found.extend(_explain(error))
    return list(dict.fromkeys(found))


def key_path(parts: Iterable[str | int]) -> str:
    """``("a", "b", 0)`` → ``a.b[0]``."""
    path = ""
    for part in parts:
        path = join_path(path, part)
    return path


def _explain(error: jsonschema.exceptions.ValidationError) -> Iterator[tuple[str, str]]:
    path = key_path(error.absolute_path)
    value = error.instance
    match error.validator:
        case "additionalProperties":
            allowed = tuple(error.schema.get("properties", {}))
            for key in value:
                if key not in allowed:
                    listed = f" (allowed: {', '.join(allowed)})" if allowed else ""
                    yield join_path(path, key), f"unknown key{listed}"
        case "type":
            expected = error.validator_value
            names = [_TYPE_NAMES[t] for t in ([expected] if isinstance(expected, str) else expected)]
            yield path, f"expected {' or '.join(names)}, got {type_name(value)}"
        case "minLength":
            yield path, f"expected a non-empty string, got {type_name(value)}"
        case "minimum" | "maximum":
            low, high = error.schema.get("minimum"), error.schema.get("maximum")
            bound = f"between {low} and {high}" if low is not None and high is not None else f">= {low}"
            if low is None:
                bound = f"<= {high}"
            yield path, f"must be {bound}, got {value}"
        case "exclusiveMinimum":
            yield path, f"must be > {error.validator_value}, got {value}"
        case "enum":
            yield path, f"must be one of {', '.join(repr(c) for c in error.validator_value)}, got {value!r}"
        case "required":
            yield path, f"needs {', '.join(repr(k) for k in error.validator_value if k not in value)}"
        case "anyOf" | "oneOf":
            yield from _explain_alternatives(error, path)
        case "not" if isinstance(value, dict) and len({"command", "url", "module"} & value.keys()) > 1:
            yield path, "give one of 'command' (stdio), 'url' (an HTTP or SSE server) or 'module' (in-process)"
        case _:
            yield path, error.message


def _explain_alternatives(error: jsonschema.exceptions.ValidationError, path: str) -> Iterator[tuple[str, str]]:
    """Explain an ``anyOf``: by the one alternative of the value's type, else by what was expected."""
    branches: dict[int, list[jsonschema.exceptions.ValidationError]] = {}
    for sub in error.context or ():
        branches.setdefault(int(sub.relative_schema_path[0]), []).append(sub)
    fitting = [errors for errors in branches.values() if not _wrong_type_here(errors)]
    if len(fitting) == 1:
        for sub in fitting[0]:
            yield from _explain(sub)
        return
    if all(len(errors) == 1 and errors[0].validator == "required" for errors in branches.values()):
        needed = " or ".join(repr(errors[0].validator_value[0]) for errors in branches.values())
        yield path, f"needs {needed}"
        return
    yield path, f"expected {_describe(error.validator_value)}, got {type_name(error.instance)}"


def _wrong_type_here(errors: Sequence[jsonschema.exceptions.ValidationError]) -> bool:
    return any(e.validator == "type" and not e.relative_path for e in errors)


def _describe(alternatives: Sequence[dict[str, Any]]) -> str:
    names = []
    for alternative in alternatives:
        kind = alternative.get("type", "a value")
        if kind == "array" and alternative.get("items", {}).get("type") == "string":
            names.append("a list of strings")
        else:
            names.append(_TYPE_NAMES.get(kind, str(kind)) if isinstance(kind, str) else "a value")
    return " or ".join(dict.fromkeys(names))
