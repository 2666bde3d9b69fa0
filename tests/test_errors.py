"""The error tree and the RUN_ERROR codes: one enum, documented the same way in its docstring and in the docs."""

from __future__ import annotations

import importlib
import pathlib
import pkgutil
import re

import pytest

import yao_actors
from yao_actors import errors
from yao_actors.errors import RunErrorCode, exception_leaves

PROTOCOL_PAGE = pathlib.Path(__file__).parent.parent / "docs" / "websocket.md"


def test_every_run_error_code_is_in_the_protocol_pages_table_and_nothing_else() -> None:
    text = PROTOCOL_PAGE.read_text(encoding="utf-8")
    table = text[text.index("The `code` of a `RUN_ERROR`") :].split("\n\n")[1]
    rows = re.findall(r"^\| `([a-z_]+)` \| ", table, flags=re.MULTILINE)
    assert sorted(rows) == sorted(code.value for code in RunErrorCode)


def test_every_run_error_code_is_in_the_docstring_table() -> None:
    documented = re.findall(r"^ {4}``([a-z_]+)``", RunErrorCode.__doc__ or "", flags=re.MULTILINE)
    assert sorted(documented) == sorted(code.value for code in RunErrorCode)


def _package_exceptions() -> set[str]:
    """Every public exception class any module of the package defines (each module imported)."""
    found: set[str] = set()
    for module in pkgutil.walk_packages(yao_actors.__path__, "yao_actors."):
        if module.name.endswith(".__main__"):  # a program: importing it runs it
            continue
        for name, value in vars(importlib.import_module(module.name)).items():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module.name
                and not name.startswith("_")
            ):
                found.add(name)
    return found


def test_the_drawing_names_every_exception_the_package_defines() -> None:
    drawn = set(re.findall(r"(?:[├└]── |^ {4})([A-Z]\w+)", errors.__doc__ or "", flags=re.MULTILINE))
    bases = {"RuntimeError", "ValueError", "Exception"}
    assert drawn - bases == _package_exceptions()


def test_exception_leaves_flattens_nested_groups_in_order() -> None:
    first, second, third = KeyError("a"), ValueError("b"), OSError("c")
    group = ExceptionGroup("outer", [first, ExceptionGroup("inner", [second, third])])
    assert exception_leaves(group) == [first, second, third]


def test_run_error_codes_are_public() -> None:
    assert yao_actors.RunErrorCode is RunErrorCode
    with pytest.raises(ValueError, match="no_such_code"):
        RunErrorCode("no_such_code")
