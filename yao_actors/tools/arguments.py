"""A model's argument string made into a checked object, or a precise reason why not.

Models send arguments as JSON text, sometimes malformed. The rules, the same on every path to a server:
an empty string is ``{}``; strict ``json.loads`` first (nesting bounded,
lone surrogates replaced, ``NaN`` / ``Infinity`` refused: a tool would get ``null``
for them; :mod:`yao_actors.untrusted.json`), ``json_repair`` only when the text is
malformed (and the repair is recorded, since it may silently complete a value
that was cut off); the value must be an object; it must satisfy the tool's
``inputSchema``, as the schema gate compiled it (:mod:`yao_actors.tools.schema_gate`:
once per schema, no reference outside it followed, patterns on a linear-time engine;
a schema the gate does not enforce leaves the judgement to the server).
Problems are values, not exceptions: every call gets a result.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from yao_actors.tools.schema_gate import schema_problems
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
        value = untrusted_json.repair(raw)
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


def check_arguments(raw: str, schema: Mapping[str, Any] | None) -> Arguments:
    """Parse ``raw`` and validate it against ``schema`` (a tool's ``inputSchema``)."""
    parsed = parse_arguments(raw)
    if parsed.value is None or not schema:
        return parsed
    problems = schema_problems(parsed.value, schema)
    if not problems:
        return parsed
    return attrs.evolve(parsed, value=None, problems=problems)
