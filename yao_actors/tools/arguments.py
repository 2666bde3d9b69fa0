"""A model's argument string made into a checked object, or a precise reason why not.

Models send arguments as JSON text, sometimes malformed. The rules (DESIGN §4.1):
an empty string is ``{}``; strict ``json.loads`` first (nesting bounded,
lone surrogates replaced, ``NaN`` / ``Infinity`` refused: a tool would get ``null``
for them; :mod:`yao_actors.untrusted.json`), ``json_repair`` only when the text is
malformed (and the repair is recorded, since it may silently complete a value
that was cut off); the value must be an object; it must satisfy the tool's
``inputSchema``. Validators are compiled once per schema and cached, keyed by the
schema's canonical JSON, because compiling costs far more than validating.
Problems are values, not exceptions: every call gets a result.

Most tool schemas are a flat object of typed properties (what MCP SDKs generate
from a function's signature). For those, and for any schema of the keywords
:mod:`yao_actors.tools.schema_check` compiles, a plain check answers "valid" for the
usual call in a few operations; only when it cannot vouch for a value does
jsonschema look at it, and only jsonschema words the problems. The plain check
never accepts what jsonschema rejects.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import attrs
import json_repair
from jsonschema import exceptions as jsonschema_exceptions  # type: ignore[import-untyped]
from jsonschema import validators
from jsonschema.protocols import Validator  # type: ignore[import-untyped]

from yao_actors.tools.schema_check import Check, compile_check, never
from yao_actors.untrusted import json as untrusted_json

_JSON_TYPE_NAMES: dict[type, str] = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


@attrs.frozen
class Arguments:
    """The outcome of checking one argument string.

    ``value`` is the object to send (``None`` when the arguments are unusable);
    ``problems`` lists what is wrong, in a stable order; ``repaired`` says the
    text was not strict JSON and ``json_repair`` produced the value.
    """

    value: dict[str, Any] | None
    problems: tuple[str, ...] = ()
    repaired: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def error(self) -> str | None:
        """One message for the model, or ``None`` when the arguments are usable."""
        if not self.problems:
            return None
        return "invalid arguments: " + "; ".join(self.problems)


def parse_arguments(raw: str) -> Arguments:
    """Parse a model's argument text leniently into an object (no schema check)."""
    if not raw.strip():
        return Arguments({})
    try:
        value = untrusted_json.loads(raw, allow_nan=False)
    except untrusted_json.JSONTooDeep as exc:
        return Arguments(None, (f"not usable JSON ({exc})",))
    except json.JSONDecodeError as exc:
        invalid = f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        value = _repair(raw)
        # json_repair answers '' for text it cannot make anything of.
        if value == "":
            return Arguments(None, (invalid,))
        if not isinstance(value, dict):
            problem = f"{invalid}, and repairing it did not give a JSON object (it gave {_kind(value)})"
            return Arguments(None, (problem,), repaired=True)
        return Arguments(value, (), repaired=True)
    except ValueError as exc:  # an integer with more digits than the interpreter converts
        return Arguments(None, (f"not usable JSON ({exc})",))
    if not isinstance(value, dict):
        return Arguments(None, (f"arguments must be a JSON object, got {_kind(value)}",))
    return Arguments(value)


def _kind(value: Any) -> str:
    """The JSON type name of a decoded value (``array``, ``string``, ...)."""
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def _repair(raw: str) -> Any:
    """``json_repair``'s reading of ``raw`` (lone surrogates replaced), or ``""`` when it has none.

    ``raw`` is known to nest no deeper than the limit, but the repair's own
    recursion may still give up on what it makes of broken text.
    """
    try:
        return untrusted_json.scrub(json_repair.repair_json(raw, return_objects=True, skip_json_loads=True))
    except RecursionError:
        return ""


def check_arguments(raw: str, schema: Mapping[str, Any] | None) -> Arguments:
    """Parse ``raw`` and validate it against ``schema`` (a tool's ``inputSchema``)."""
    parsed = parse_arguments(raw)
    if parsed.value is None or not schema:
        return parsed
    problems = schema_problems(parsed.value, schema)
    if not problems:
        return parsed
    return attrs.evolve(parsed, value=None, problems=problems)


def schema_problems(value: Any, schema: Mapping[str, Any]) -> tuple[str, ...]:
    """Every way ``value`` violates ``schema``, each naming its field, sorted by field.

    A schema that is itself invalid is not held against the call: the server
    remains the judge of its own tool's input.
    """
    validator, plain = _compiled(schema)
    if plain(value):
        return ()
    if validator is None:
        return ()
    errors = sorted(validator.iter_errors(value), key=lambda e: (_field(e), e.message))
    return tuple(f"{field}: {e.message}" if (field := _field(e)) else e.message for e in errors)


_IDENTITY_CACHE_SIZE = 1024
_by_identity: dict[int, tuple[Mapping[str, Any], Validator | None, Check]] = {}


def compiled_validator(schema: Mapping[str, Any]) -> Validator | None:
    """The cached compiled validator of ``schema``, or ``None`` if the schema is invalid.

    The same schema object (a catalog entry's, called turn after turn) is found
    by identity without re-serialising it; schemas are treated as immutable.
    Equal schemas in other objects share one compiled validator through the
    canonical-JSON cache.
    """
    return _compiled(schema)[0]


def _compiled(schema: Mapping[str, Any]) -> tuple[Validator | None, Check]:
    """The cached validator and plain check (:func:`~yao_actors.tools.schema_check.compile_check`) of ``schema``.

    An invalid schema (no validator) gets no plain check either: the server judges such a tool's input.
    """
    hit = _by_identity.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1], hit[2]
    validator = _compile(json.dumps(schema, sort_keys=True, separators=(",", ":"), default=str))
    plain = compile_check(schema) if validator is not None else never
    if len(_by_identity) >= _IDENTITY_CACHE_SIZE:
        del _by_identity[next(iter(_by_identity))]
    _by_identity[id(schema)] = (schema, validator, plain)
    return validator, plain


@functools.lru_cache(maxsize=1024)
def _compile(canonical: str) -> Validator | None:
    schema = json.loads(canonical)
    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema_exceptions.SchemaError:
        return None
    validator: Validator = cls(schema)
    return validator


def _field(error: jsonschema_exceptions.ValidationError) -> str:
    """``a.b[0].c`` for the path of the failing value; ``""`` for the object itself."""
    text = ""
    for part in error.absolute_path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text
