"""Regular expressions from untrusted schemas, run on a linear-time engine (RE2).

A JSON Schema's ``pattern`` (and ``patternProperties``' names) come from whoever wrote the schema: an MCP
server, a client. Python's ``re`` backtracks, so a pattern such as ``^(a+)+$`` takes seconds, doubling with
each character of the input, and a check runs on the event loop. RE2 answers in time linear in the input
whatever the pattern, and refuses what it cannot do that way (backreferences, lookaround): such a pattern is
not enforced (:func:`linear_search` answers ``None``, :func:`refusal` says why), and is never handed to ``re``.
RE2's syntax is close to the ECMA 262 one JSON Schema names (``\\d`` is ASCII, ``$`` only matches at the end);
a pattern is searched for anywhere in the string, as JSON Schema asks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import re2  # type: ignore[import-untyped]

from yao_actors.untrusted import json as untrusted_json

Search = Callable[[str], bool]
"""Whether a pattern is found in a string."""

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is said once per tool by the gate, not on stderr per compile
_OPTIONS.never_capture = True  # only "does it match" is asked


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str) -> Search | str:
    """The search of ``pattern``, or why RE2 refuses it."""
    try:
        search = re2.compile(pattern, _OPTIONS).search
    except re2.error as error:
        reason = error.args[0] if error.args else error
        return reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
    except UnicodeEncodeError:
        return "the pattern is not valid UTF-8 (a lone surrogate)"

    def found(text: str) -> bool:
        try:
            return search(text) is not None
        except UnicodeEncodeError:  # a lone surrogate (RE2 reads UTF-8): searched for as U+FFFD
            return search(untrusted_json.scrub_text(text)) is not None

    return found


def linear_search(pattern: str) -> Search | None:
    """A linear-time search for ``pattern`` (compiled once), or ``None`` when RE2 refuses it (not enforced)."""
    compiled = _compiled(pattern)
    return None if isinstance(compiled, str) else compiled


def refusal(pattern: str) -> str | None:
    """Why RE2 refuses ``pattern``, or ``None`` when it runs it."""
    compiled = _compiled(pattern)
    return compiled if isinstance(compiled, str) else None
