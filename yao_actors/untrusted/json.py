"""JSON from sources the runtime does not control, parsed and serialised without surprises.

Model output (tool-call arguments, stream chunks) and tool results are JSON
text anyone upstream may have shaped. Two things in such text can break the
runtime far from where it was read:

- **nesting**: ``json.loads`` (and ``json_repair``) recurse once per level, so
  a few kilobytes of ``[[[[...`` raise ``RecursionError``, and a value nested
  just under the interpreter's limit breaks every later ``json.dumps`` of it.
  :func:`loads` refuses text nested deeper than :data:`MAX_DEPTH` with
  :class:`JSONTooDeep` (a ``ValueError``, like every other parse failure).
- **lone surrogates**: the valid escape ``"\\ud800"`` parses to a string that
  cannot be encoded as UTF-8, so the HTTP client sending it to a model, or the
  writer sending it in an event, would fail on every later use. The policy:
  such code points become U+FFFD (the replacement character) as soon as they
  are read (:func:`loads`, :func:`scrub_text`), and :func:`dumps_utf8`
  replaces any that still reach a serialisation.

Python's ``json`` also reads ``NaN``, ``Infinity`` and ``-Infinity``, which JSON
does not have: sent on, they become ``null`` (what a JSON encoder makes of
them) and a tool gets a value nobody gave it. Where a value goes on to a tool,
:func:`loads` with ``allow_nan=False`` refuses them (:class:`JSONNotFinite`).
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

import json_repair

MAX_DEPTH = 128
"""Deepest nesting of arrays and objects accepted in untrusted JSON text."""

REPLACEMENT = "\ufffd"

_SURROGATE = re.compile("[\ud800-\udfff]")
#: A surrogate code point in the text, or a ``\\uD800``–``\\uDFFF`` escape that parses to one.
_SURROGATE_OR_ESCAPE = re.compile("[\ud800-\udfff]|\\\\u[dD][89abcdefABCDEF]")
#: A JSON string literal (also matches the rest of an unterminated one).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_STEPS = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _STEPS)


class JSONTooDeep(ValueError):
    """Untrusted JSON text nests arrays and objects deeper than allowed."""

    def __init__(self, limit: int = MAX_DEPTH) -> None:
        super().__init__(f"JSON nested deeper than {limit} levels")
        self.limit = limit


class JSONNotFinite(ValueError):
    """Untrusted JSON text holds ``NaN``, ``Infinity`` or ``-Infinity``, which JSON has no number for."""

    def __init__(self, constant: str) -> None:
        super().__init__(f"{constant} is not a JSON number; numbers must be finite")
        self.constant = constant


class JSONNotObject(ValueError):
    """Untrusted JSON text that must hold one object holds another value (a list, a string, a number...)."""

    def __init__(self, value: Any) -> None:
        super().__init__(f"expected a JSON object, got {type_name(value)}")
        self.value = value


def type_name(value: Any) -> str:
    """How a message names the JSON type of ``value`` (``an object``, ``a list``, ``the number 3``, ``null``...)."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"the number {value}"
    return names.get(type(value), type(value).__name__)


def _refuse_constant(constant: str) -> Any:
    raise JSONNotFinite(constant)


#: One decoder made once: ``json.loads`` with an option builds a decoder (and its scanner) at every call.
_FINITE = json.JSONDecoder(parse_constant=_refuse_constant)


def _finite_loads(text: str) -> Any:
    """``json.loads(text, parse_constant=_refuse_constant)``, its checks included, on the decoder made once."""
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _FINITE.decode(text)


def nesting_depth(text: str) -> int:
    """How deep ``text`` nests ``[`` and ``{`` outside string literals (of valid JSON; an estimate otherwise).

    Cheap when the text has few brackets; otherwise one regex pass to drop
    strings and one pass over the brackets, both in C.
    """
    if text.count("[") + text.count("{") == 0:
        return 0
    brackets = _STRING.sub("", text).encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKETS)
    return max(accumulate(_STEPS[b] for b in brackets), default=0)


def check_depth(text: str, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`JSONTooDeep` if ``text`` nests deeper than ``limit``."""
    if text.count("[") + text.count("{") > limit and nesting_depth(text) > limit:
        raise JSONTooDeep(limit)


def loads(text: str, limit: int = MAX_DEPTH, *, allow_nan: bool = True) -> Any:
    """``json.loads`` for untrusted text: nesting bounded, lone surrogates replaced.

    Raises ``ValueError`` for anything that is not acceptable JSON:
    ``json.JSONDecodeError``, :class:`JSONTooDeep`, the interpreter's limit
    on the digits of an integer, and, with ``allow_nan`` false, :class:`JSONNotFinite`.
    """
    check_depth(text, limit)
    try:
        value = json.loads(text) if allow_nan else _finite_loads(text)
    except RecursionError:  # a deep stack already, even under the limit
        raise JSONTooDeep(limit) from None
    return scrub(value) if _SURROGATE_OR_ESCAPE.search(text) else value


def loads_object(text: str, limit: int = MAX_DEPTH, *, allow_nan: bool = True) -> dict[str, Any]:
    """:func:`loads` for text that must hold one JSON object (a sample record, a model's stream chunk, a tool's
    arguments): the ``ValueError`` :func:`loads` raises, or :class:`JSONNotObject` naming what it holds instead.
    The caller's message says where the text came from."""
    value = loads(text, limit, allow_nan=allow_nan)
    if not isinstance(value, dict):
        raise JSONNotObject(value)
    return value


def repair(text: str) -> Any:
    """``json_repair``'s reading of malformed ``text`` (lone surrogates replaced), or ``""`` when it has none
    (json_repair's own answer for text it can make nothing of).

    ``text`` must be known to nest no deeper than the limit (:func:`loads` refused it as malformed, not as too
    deep), but the repair's own recursion may still give up on what it makes of broken text.
    """
    try:
        return scrub(json_repair.repair_json(text, return_objects=True, skip_json_loads=True))
    except RecursionError:
        return ""


def scrub_text(text: str) -> str:
    """``text`` with every surrogate code point (unencodable in UTF-8) replaced by U+FFFD."""
    return _SURROGATE.sub(REPLACEMENT, text) if _SURROGATE.search(text) else text


def scrub(value: Any) -> Any:
    """A JSON value with :func:`scrub_text` applied to every string, keys included.

    Recursive: meant for values of bounded depth (those :func:`loads` returns).
    """
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        return {scrub_text(k) if isinstance(k, str) else k: scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(item) for item in value]
    return value


def dumps_utf8(value: Any) -> bytes:
    """Compact UTF-8 JSON of ``value``; surrogate code points anywhere in it become U+FFFD.

    Serialises once; only text that fails to encode is scrubbed and encoded again.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return scrub_text(text).encode("utf-8")


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_COMPACT_ASCII = json.JSONEncoder(separators=(",", ":"))


# ``_COMPACT``'s own C encoder, made once: ``JSONEncoder.encode`` makes one per call, which costs about as much as
# encoding a small event. Without the circular-reference table (``markers``) it keeps no state between calls; a
# value it cannot encode (a cycle among them) is encoded again by ``_COMPACT``, which raises the usual error.
def _encoder_made_once() -> Any:
    """``_COMPACT``'s C encoder, or ``None`` where there is none (no C speedups, or another Python's signature)."""
    make: Any = getattr(json.encoder, "c_make_encoder", None)  # untyped
    try:
        return make(None, _COMPACT.default, json.encoder.encode_basestring, None, ":", ",", False, False, True)
    except TypeError:  # absent (None is not callable), or made otherwise in this Python: the plain encoder serves
        return None


_ENCODE_ONCE: Any = _encoder_made_once()


def compact_json(value: Any) -> str:
    """Compact JSON with key order preserved, non-ASCII kept, and no HTML escaping."""
    try:
        return "".join(_ENCODE_ONCE(value, 0)) if _ENCODE_ONCE is not None else _COMPACT.encode(value)
    except Exception:  # not JSON (or a cycle): the plain encoder says why, as it always did
        return _COMPACT.encode(value)


def encode_json(value: Any) -> str:
    """``value`` as compact JSON, non-ASCII text kept as is: how events and frames go on the wire and into a store.

    The result is always valid UTF-8: a value holding a string that is not (a lone surrogate) is written with
    ``\\u`` escapes instead, so neither a socket write nor a store can fail on it. Raises ``TypeError`` or
    ``ValueError`` for a value that is not JSON.
    """
    text = compact_json(value)
    # ASCII text is UTF-8 by definition: only other text needs the check (which encodes it).
    if text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        return _COMPACT_ASCII.encode(value)
    return text
