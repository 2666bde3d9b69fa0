"""The generic checks of the configuration reader: shapes, numbers, strings, ``${VAR}`` references.

:class:`ValueReader` collects one message per problem, each naming its key
path, instead of stopping at the first; :mod:`yao_actors.config.sections`
builds the sections on top of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def join_path(path: str, key: str | int) -> str:
    """The key path of ``key`` under ``path`` (``a.b``, ``a[0]``)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def related_paths(a: str, b: str) -> bool:
    """Whether one key path is the other or lies under it (``a.b`` and ``a.b[0].c``)."""
    short, long = sorted((a, b), key=len)
    return long == short or not short or long.startswith((f"{short}.", f"{short}["))


def type_name(value: Any) -> str:
    """How a problem message names the JSON type of ``value``."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"the number {value}"
    return names.get(type(value), type(value).__name__)


class ValueReader:
    """Checks decoded JSON values, collecting one message per problem in ``problems``."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.problems: list[str] = []
        #: The key path of each of ``problems``.
        self.problem_paths: list[str] = []

    def fail(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}" if path else message)
        self.problem_paths.append(path)

    def obj(self, value: Any, path: str, allowed: tuple[str, ...]) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.fail(path, f"expected an object, got {type_name(value)}")
            return None
        for key in value:
            if key not in allowed:
                self.fail(join_path(path, key), f"unknown key (allowed: {', '.join(allowed)})")
        return value

    def string(self, value: Any, path: str, *, empty: bool = False) -> str | None:
        if not isinstance(value, str) or (not empty and value == ""):
            self.fail(path, f"expected a {'' if empty else 'non-empty '}string, got {type_name(value)}")
            return None
        return value

    def strings(self, value: Any, path: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            self.fail(path, f"expected a list of strings, got {type_name(value)}")
            return ()
        return tuple(s for i, item in enumerate(value) if (s := self.string(item, join_path(path, i))) is not None)

    def number(self, value: Any, path: str, *, minimum: float = 0.0, strict: bool = True) -> float | None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(path, f"expected a number, got {type_name(value)}")
            return None
        if value < minimum or (strict and value == minimum):
            self.fail(path, f"must be {'>' if strict else '>='} {minimum:g}, got {value}")
            return None
        return float(value)

    def integer(self, value: Any, path: str, *, minimum: int = 0, maximum: int | None = None) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"expected an integer, got {type_name(value)}")
            return None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
            self.fail(path, f"must be {bound}, got {value}")
            return None
        return value

    def boolean(self, value: Any, path: str) -> bool | None:
        if not isinstance(value, bool):
            self.fail(path, f"expected true or false, got {type_name(value)}")
            return None
        return value

    def choice(self, value: Any, path: str, choices: tuple[str, ...]) -> str | None:
        if value not in choices:
            self.fail(path, f"must be one of {', '.join(repr(c) for c in choices)}, got {value!r}")
            return None
        return str(value)

    def expand(self, value: str, path: str) -> str:
        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in self.environ:
                return self.environ[name]
            if default is not None:
                return default
            self.fail(path, f"environment variable {name} is not set")
            return ""

        return _ENV_REF.sub(substitute, value)

    def expanded_string(self, value: Any, path: str) -> str | None:
        """A non-empty string with its ``${VAR}`` references expanded."""
        text = self.string(value, path)
        return None if text is None else self.expand(text, path)

    def entries(self, value: Any, path: str, what: str, build: Callable[[str, Any, str], T | None]) -> dict[str, T]:
        """An object of ``what`` by key, each entry made by ``build(key, item, path)``; entries it refuses are left out."""
        if not isinstance(value, dict):
            self.fail(path, f"expected an object of {what}, got {type_name(value)}")
            return {}
        built = {}
        for key, item in value.items():
            entry = build(key, item, join_path(path, key))
            if entry is not None:
                built[key] = entry
        return built

    def string_map(self, value: Any, path: str) -> dict[str, str]:
        """An object of strings, ``${VAR}`` references expanded."""
        return self.entries(value, path, "strings", self._expanded)

    def _expanded(self, key: str, item: Any, path: str) -> str | None:
        text = self.string(item, path, empty=True)
        return None if text is None else self.expand(text, path)
