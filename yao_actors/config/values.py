"""The generic checks of the configuration reader: shapes, numbers, strings, ``${VAR}`` references.

:class:`ValueReader` collects one message per problem, each naming its key
path, instead of stopping at the first; :mod:`yao_actors.config.sections`
builds the sections on top of it.

References are read in the forms Claude Desktop, Cursor and VS Code files use: ``${VAR}``, ``${env:VAR}`` (each
with ``:-default``), ``${userHome}`` and ``${pathSeparator}`` (``${/}``); an editor's workspace variables and VS
Code's ``${input:ID}`` (a value the editor prompts for) are errors that say what to write instead.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from yao_actors.untrusted.json import type_name as type_name  # how a problem message names a JSON type

T = TypeVar("T")

_REFERENCE = re.compile(r"\$\{([^}]*)\}")
_ENV_REF = re.compile(r"(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)
_PREFIXED = re.compile(r"([A-Za-z]+):(.*)", re.DOTALL)
#: The variables of an editor's workspace (VS Code, Cursor): a service has no workspace.
WORKSPACE_VARIABLES = frozenset(
    {"workspaceFolder", "workspaceFolderBasename", "workspaceRoot", "fileWorkspaceFolder", "file", "relativeFile"}
)


def join_path(path: str, key: str | int) -> str:
    """The key path of ``key`` under ``path`` (``a.b``, ``a[0]``)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def related_paths(a: str, b: str) -> bool:
    """Whether one key path is the other or lies under it (``a.b`` and ``a.b[0].c``)."""
    short, long = sorted((a, b), key=len)
    return long == short or not short or long.startswith((f"{short}.", f"{short}["))


class ValueReader:
    """Checks decoded JSON values, collecting one message per problem in ``problems``."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.problems: list[str] = []
        #: The key path of each of ``problems``.
        self.problem_paths: list[str] = []
        #: VS Code's ``inputs`` by id, each with its description (named by a ``${input:ID}`` problem).
        self.inputs: dict[str, str] = {}
        #: While set (a ``disabled`` entry is read), a reference that cannot be expanded stays as it is written.
        self.lenient = False
        #: What reading noted without refusing the file, each with its key path (``Config.notes``).
        self.notes: list[str] = []

    @contextmanager
    def leniently(self, lenient: bool = True) -> Iterator[None]:
        """Read what is inside without requiring its references (the entry will not be used)."""
        before, self.lenient = self.lenient, lenient
        try:
            yield
        finally:
            self.lenient = before

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
        """``value`` with its references replaced; one problem per reference that cannot be."""

        def substitute(match: re.Match[str]) -> str:
            text, problem = self._reference(match.group(1))
            if problem is None:
                return match.group(0) if text is None else text
            if not self.lenient:
                self.fail(path, problem)
            return match.group(0)

        return _REFERENCE.sub(substitute, value)

    def _reference(self, inner: str) -> tuple[str | None, str | None]:
        """What ``${inner}`` stands for and what keeps it from being read: ``(None, None)`` leaves it as written."""
        if inner == "userHome":
            return str(Path.home()), None
        if inner in ("pathSeparator", "/"):
            return os.sep, None
        if inner in WORKSPACE_VARIABLES:
            return None, (
                f"${{{inner}}} is an editor's workspace variable, and a service has no workspace: write the path "
                "(relative paths are from the directory yao-actors runs in), or ${env:NAME} with NAME set"
            )
        if match := _ENV_REF.fullmatch(inner):
            name, default = match.group(1), match.group(2)
            if name in self.environ:
                return self.environ[name], None
            if default is not None:
                return default, None
            return None, f"environment variable {name} is not set"
        if (match := _PREFIXED.fullmatch(inner)) and match.group(1) in ("input", "config", "command"):
            kind, rest = match.group(1), match.group(2)
            if kind == "input":
                described = f" ({self.inputs[rest]!r})" if self.inputs.get(rest) else ""
                return None, (
                    f"${{input:{rest}}}{described}: VS Code's prompted inputs are not supported here; set the value "
                    "in an environment variable and write ${env:NAME} instead"
                )
            return None, f"${{{inner}}}: VS Code's ${{{kind}:...}} variables are not supported here; use ${{env:NAME}}"
        return None, None

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
