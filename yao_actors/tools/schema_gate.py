"""The one gate for JSON Schemas that come from outside: compiled here, once, and nowhere else.

A tool's ``inputSchema`` and ``outputSchema``, an elicitation's ``requestedSchema`` and the answers checked
against it come from MCP servers (and the answers from AG-UI clients) this process does not control; a client's
own tools' ``parameters`` only go to the model, and nothing compiles them. jsonschema's defaults
are made for trusted schemas: a ``$ref`` to ``http://…`` or ``file:///…`` is fetched (blocking the event
loop, with no deadline, and the fetched values come back in validation errors), and ``pattern`` runs on
Python's backtracking ``re``. Here instead:

- **No retrieval, ever.** References resolve only inside the schema's own document (its ``$defs``, anchors,
  embedded ``$id``\\ s): the registry's retrieval refuses every URI. A schema with a reference that does not
  resolve, or that is not a valid schema, is *not enforced*: :attr:`Gated.problem` says why, the tool's
  calls go to the server unchecked (the server judges its own tool's input) and its structured output is
  taken as it comes. The server actor logs it once per tool, and ``yao-actors tools``, ``check --connect``
  and each run's ``server_status`` event say it (:func:`tool_schema_notes`).
- **Linear-time patterns.** ``pattern``, ``patternProperties`` (and ``additionalProperties`` beside them)
  run on RE2 (:mod:`~yao_actors.tools.linear_patterns`); a pattern RE2 refuses is not enforced and is
  named in :attr:`Gated.unenforced`. ``unevaluatedProperties`` beside ``patternProperties`` is not
  enforced either (jsonschema would run those patterns on ``re``), nor is the ``regex`` format.
- **Flat questions.** An elicitation asks only for flat primitive fields, as MCP requires
  (:func:`~yao_actors.tools.question_schemas.question_problem`); an answer gives no object value
  (:func:`answer_problem`), and the fields it leaves out that have a ``default`` are filled with it before it is
  sent (:func:`~yao_actors.tools.question_schemas.fill_defaults`).

Compiling costs far more than validating, so each schema is compiled once: found again by identity (a
catalog entry's schema, call after call) or by its canonical JSON. A tool call's arguments first meet the
plain check (:mod:`~yao_actors.tools.schema_check`), which says "valid" for the usual call in a few
operations; only when it cannot vouch for a value does the validator look, and only it words problems.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

import attrs
import mcp.types
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema import FormatChecker, ValidationError, validators  # type: ignore[import-untyped]
from jsonschema import exceptions as jsonschema_exceptions
from jsonschema.protocols import Validator  # type: ignore[import-untyped]

from yao_actors.tools.linear_patterns import linear_search, refusal
from yao_actors.tools.schema_check import Check, compile_check, never

#: Where a problem with a reference is shown, at most this many characters of it.
_SHOWN = 120
#: Keywords whose value is a reference to resolve.
_REFERENCES: Final = ("$ref", "$dynamicRef", "$recursiveRef")
#: The formats an answer to a question is checked for (those MCP names), where jsonschema can check them.
_ANSWER_FORMATS: Final = tuple(name for name in ("email", "uri", "date", "date-time") if name in FormatChecker.checkers)
#: Errors a compiled schema may still raise on a value, from a corner the compile did not walk (a ``$ref`` into a
#: ``default`` that holds another ``$ref``, a ``$schema`` jsonschema cannot read): the value is then not judged.
_SCHEMA_FAULTS: Final = (referencing.exceptions.Unresolvable, TypeError, ValueError, RecursionError)


def _refuse(uri: str) -> referencing.Resource[Any]:
    """The registry's retrieval: nothing outside the schema's own document is ever fetched or read."""
    raise referencing.exceptions.NoSuchResource(uri)


_NO_RETRIEVAL: Final = referencing.Registry(retrieve=_refuse)  # type: ignore[call-arg]  # attrs field _retrieve


@attrs.frozen
class Gated:
    """A schema as the gate compiled it.

    ``validator`` is ``None`` when the schema is not enforced at all (``problem`` says why); ``check`` is
    its plain check (:data:`~yao_actors.tools.schema_check.never` without a validator); ``unenforced``
    names the parts of an enforced schema that are not (patterns RE2 refuses).
    """

    validator: Validator | None
    check: Check = never
    problem: str | None = None
    unenforced: tuple[str, ...] = ()

    @property
    def notes(self) -> tuple[str, ...]:
        """What a user should know about this schema (empty: it is enforced whole)."""
        if self.problem is not None:
            return (f"not checked here ({self.problem})",)
        return self.unenforced


_IDENTITY_CACHE_SIZE = 1024
_by_identity: dict[int, tuple[Mapping[str, Any], Gated]] = {}


def gate(schema: Mapping[str, Any]) -> Gated:
    """The compiled form of ``schema`` (cached; never raises, whatever the schema holds).

    The same schema object is found by identity without serialising it again; schemas are treated as
    immutable. Equal schemas in other objects share one compiled form through the canonical-JSON cache.
    """
    hit = _by_identity.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    gated = _compiled(schema, formats=False)
    if len(_by_identity) >= _IDENTITY_CACHE_SIZE:
        del _by_identity[next(iter(_by_identity))]
    _by_identity[id(schema)] = (schema, gated)
    return gated


def compiled_validator(schema: Mapping[str, Any]) -> Validator | None:
    """The cached validator of ``schema``, or ``None`` when it is not enforced."""
    return gate(schema).validator


def schema_problems(value: Any, schema: Mapping[str, Any]) -> tuple[str, ...]:
    """Every way ``value`` violates ``schema``, each naming its field, sorted by field (none for a schema the
    gate does not enforce: the server judges)."""
    gated = gate(schema)
    if gated.check(value) or gated.validator is None:
        return ()
    try:
        errors = sorted(gated.validator.iter_errors(value), key=lambda e: (_field(e), e.message))
    except _SCHEMA_FAULTS:
        return ()
    return tuple(f"{field}: {e.message}" if (field := _field(e)) else e.message for e in errors)


def tool_schema_notes(tool: mcp.types.Tool) -> tuple[str, ...]:
    """What is not enforced of a tool's ``inputSchema`` and ``outputSchema``, one line each (empty: all is)."""
    notes = [f"inputSchema {note}" for note in gate(tool.input_schema).notes]
    if tool.output_schema is not None:
        notes += [f"outputSchema {note}" for note in gate(tool.output_schema).notes]
    return tuple(notes)


# ------------------------------------------------------------------ compiling


def _compiled(schema: Any, *, formats: bool) -> Gated:
    """The compiled form of ``schema``, from the canonical-JSON cache (``formats``: answers' format checks)."""
    try:
        canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"), default=str)
    except (RecursionError, ValueError):
        return Gated(None, problem="the schema is nested too deep to read")
    return _compile_text(canonical, formats=formats)


@functools.lru_cache(maxsize=1024)
def _compile_text(canonical: str, *, formats: bool) -> Gated:
    return _compile(json.loads(canonical), formats=formats)


def _compile(schema: Any, *, formats: bool) -> Gated:
    """Compile ``schema`` as the module says; a schema that cannot be enforced gets its ``problem``."""
    if not isinstance(schema, dict | bool):
        return Gated(None, problem=f"a schema is a JSON object, not {type(schema).__name__}")
    dialect = schema.get("$schema") if isinstance(schema, dict) else None
    if dialect is not None and not isinstance(dialect, str):
        return Gated(None, problem="$schema is not a string")
    try:
        cls = validators.validator_for(schema, default=validators.Draft202012Validator)
        cls.check_schema(schema, format_checker=None)  # "format": "regex" would compile its patterns with re
        walked = _walk(schema, cls)
    except jsonschema_exceptions.SchemaError as error:
        return Gated(None, problem=f"not a valid JSON Schema: {_short(error.message)}")
    except RecursionError:
        return Gated(None, problem="the schema is nested too deep to check")
    except ValueError as error:  # a URI that cannot be read ($schema, $id, $ref)
        return Gated(None, problem=f"not a usable JSON Schema: {_short(str(error))}")
    if isinstance(walked, str):
        return Gated(None, problem=walked)
    patterns, skip_unevaluated = walked
    unenforced = [f"pattern {p!r:.{_SHOWN}} is not enforced: {why}" for p in patterns if (why := refusal(p))]
    if skip_unevaluated:
        unenforced.append("unevaluatedProperties is not enforced beside patternProperties")
    checker = FormatChecker(_ANSWER_FORMATS) if formats else None
    validator = _gated_class(cls, skip_unevaluated)(schema, registry=_NO_RETRIEVAL, format_checker=checker)
    check = compile_check(schema) if not formats else never
    return Gated(validator, check, unenforced=tuple(sorted(set(unenforced))))


def _walk(schema: Any, cls: Any) -> str | tuple[list[str], bool]:
    """Resolve every reference of ``schema`` inside its document and gather its patterns: the patterns and
    whether ``unevaluatedProperties`` must be left out, or why the schema cannot be enforced."""
    nested = _nested_dialect(schema)
    if nested is not None:
        return f"a nested $schema ({nested!r:.{_SHOWN}}) is not supported: one dialect per schema"
    dialect = cls.ID_OF(cls.META_SCHEMA) or "urn:unknown-dialect"
    specification = referencing.jsonschema.specification_with(dialect, default=referencing.Specification.OPAQUE)
    root = specification.create_resource(schema)
    stack = [(_NO_RETRIEVAL.resolver_with_root(root), root)]
    patterns: list[str] = []
    keywords: set[str] = set()
    while stack:
        resolver, resource = stack.pop()
        contents = resource.contents
        if isinstance(contents, Mapping):
            keywords.update(contents)
            for keyword in _REFERENCES:
                ref = contents.get(keyword)
                if isinstance(ref, str) and (problem := _unresolved(resolver, keyword, ref)) is not None:
                    return problem
            if isinstance(contents.get("pattern"), str):
                patterns.append(contents["pattern"])
            if isinstance(contents.get("patternProperties"), Mapping):
                patterns.extend(contents["patternProperties"])
        stack.extend((resolver.in_subresource(sub), sub) for sub in resource.subresources())
    return patterns, {"patternProperties", "unevaluatedProperties"} <= keywords


def _unresolved(resolver: Any, keyword: str, ref: str) -> str | None:
    try:
        resolver.lookup(ref)
    except referencing.exceptions.Unresolvable:
        return f"{keyword} {ref!r:.{_SHOWN}} is not followed: only references inside the schema resolve"
    return None


def _nested_dialect(schema: Any) -> str | None:
    """A ``$schema`` naming a dialect anywhere below the root: jsonschema would switch to its stock validator
    there (with Python's ``re``), so such a schema is refused whole."""
    stack: list[Any] = [value for value in schema.values()] if isinstance(schema, dict) else []
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            dialect = node.get("$schema")
            if isinstance(dialect, str) and _names_a_dialect(dialect):
                return dialect
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None


def _names_a_dialect(uri: str) -> bool:
    try:
        return validators.validator_for({"$schema": uri}, default=None) is not None
    except ValueError:
        return False


def _short(text: str) -> str:
    return text if len(text) <= 2 * _SHOWN else text[: 2 * _SHOWN] + "…"


# ------------------------------------------------------------------ the keywords that run patterns


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string"):
        search = linear_search(pattern)
        if search is not None and not search(instance):
            yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, properties: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in properties.items():
        search = linear_search(pattern)
        if search is None:
            continue
        for key, value in instance.items():
            if search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, allowed: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """jsonschema's ``additionalProperties`` with the names matched on RE2 (a refused pattern matches all)."""
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    searches = [linear_search(pattern) for pattern in schema.get("patternProperties", {})]
    extras = {
        key for key in instance if key not in declared and not any(search is None or search(key) for search in searches)
    }
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            listed = ", ".join(repr(each) for each in sorted(extras, key=str))
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")


def _not_enforced(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    return iter(())


@functools.cache
def _gated_class(cls: Any, skip_unevaluated: bool) -> Any:
    """``cls`` with the pattern keywords on RE2 (and ``unevaluatedProperties`` not enforced when asked)."""
    keywords = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    if skip_unevaluated and "unevaluatedProperties" in cls.VALIDATORS:
        keywords["unevaluatedProperties"] = _not_enforced
    return validators.extend(cls, keywords)


def _field(error: jsonschema_exceptions.ValidationError) -> str:
    """``a.b[0].c`` for the path of the failing value; ``""`` for the object itself."""
    text = ""
    for part in error.absolute_path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


# ------------------------------------------------------------------ answers to questions


def answer_problem(content: Mapping[str, Any], schema: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """The first problem of an answer's ``content`` to a question of ``schema``: the field (``""`` for the
    whole) and what is wrong; ``None`` when the answer may be sent."""
    for name, value in content.items():
        if isinstance(value, dict) or (isinstance(value, list) and not all(isinstance(v, str) for v in value)):
            return str(name), "an answer's fields are strings, numbers, booleans or lists of choices, not objects"
    gated = _compiled(dict(schema or {"type": "object"}), formats=True)
    if gated.validator is None:
        return None
    try:
        error = jsonschema_exceptions.best_match(gated.validator.iter_errors(dict(content)))
    except _SCHEMA_FAULTS:
        return None
    if error is None:
        return None
    return ".".join(str(part) for part in error.absolute_path), error.message
