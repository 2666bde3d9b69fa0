"""The paths users import and run keep working, and the package root stays the public API and little else.

Users write ``from yao_actors.aio import open_runtime``, run ``uvicorn`` on ``yao_actors.asgi``, serve with
``yao_actors.asgi_server.run``, start ``yao-actors`` (``yao_actors.cli:main``) and ``python -m yao_actors.cli``, and
the image's HEALTHCHECK runs ``python -m yao_actors.healthcheck``: moving the code behind them must not move them."""

from __future__ import annotations

import importlib
import pathlib
import subprocess
import sys
import tomllib

import pytest

import yao_actors
import yao_actors.testing

ROOT = pathlib.Path(yao_actors.__file__).parent

#: The most modules the package root may hold (``__init__.py`` counted); every other idea has a room of its own.
MOST_ROOT_MODULES = 12

PUBLIC = (
    ("yao_actors.aio", "open_runtime"),
    ("yao_actors.aio", "Runtime"),
    ("yao_actors.asgi", "app"),
    ("yao_actors.asgi", "AsgiApp"),
    ("yao_actors.asgi_server", "run"),
    ("yao_actors.asgi_server", "GracefulServer"),
    ("yao_actors.cli", "main"),
    ("yao_actors.healthcheck", "main"),
)


def test_the_root_holds_few_modules() -> None:
    modules = sorted(path.name for path in ROOT.glob("*.py"))
    assert len(modules) <= MOST_ROOT_MODULES, modules


@pytest.mark.parametrize(("module", "name"), PUBLIC)
def test_a_public_path_resolves(module: str, name: str) -> None:
    assert callable(getattr(importlib.import_module(module), name))


def test_every_exported_name_resolves() -> None:
    for package in (yao_actors, yao_actors.testing):
        assert [name for name in package.__all__ if getattr(package, name, None) is None] == []


def test_the_console_script_names_main() -> None:
    project = tomllib.loads((ROOT.parent / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["scripts"] == {"yao-actors": "yao_actors.cli:main"}


def test_python_m_yao_actors_cli_runs_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "yao_actors.cli", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(yao_actors.__version__)
