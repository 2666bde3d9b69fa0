"""Importing yao_actors changes no logging configuration: every module of the package imported, no logger (the
SDK's, the root, anyone's) has gained a filter or a handler, or changed its level. What the program wants from
logging is set where it starts (``configure_logging`` for ``serve``; a flow's own filter when the flow first runs).

Each run is a fresh interpreter: the libraries the package uses are imported first (a library may add a
``NullHandler`` to its own logger as it loads), then every module of the package, and the loggers are compared."""

from __future__ import annotations

import json
import subprocess
import sys

#: The package's modules, found by their files (``pkgutil.walk_packages`` would import the packages to walk them).
PACKAGE_MODULES = """
import importlib, pathlib, yao_actors
root = pathlib.Path(yao_actors.__file__).parent
names = sorted(
    ".".join(("yao_actors", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
    for path in root.rglob("*.py") if path.name != "__main__.py"
)
"""

LIBRARIES = (
    PACKAGE_MODULES
    + """
import json, sys
for name in names:
    importlib.import_module(name)
print(json.dumps(sorted(name for name in sys.modules if name.partition(".")[0] != "yao_actors")))
"""
)

COMPARE = (
    PACKAGE_MODULES
    + """
import contextlib, json, logging, sys

def loggers():
    every = {"": logging.getLogger(), **logging.root.manager.loggerDict}
    return {name: (list(map(repr, log.filters)), list(map(repr, log.handlers)), log.level)
            for name, log in every.items() if isinstance(log, logging.Logger)}

for library in json.loads(sys.stdin.read()):
    with contextlib.suppress(Exception):
        importlib.import_module(library)
before = loggers()
for name in names:
    importlib.import_module(name)
after = loggers()
print(json.dumps({name: state for name, state in after.items() if state != before.get(name, ([], [], 0))}))
"""
)


def python(code: str, stdin: str = "") -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], input=stdin, capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout


def test_importing_every_module_configures_no_logger() -> None:
    libraries = python(LIBRARIES)
    assert "mcp.client.auth.oauth2" in json.loads(libraries)  # the SDK's loggers exist before the package loads
    assert json.loads(python(COMPARE, stdin=libraries)) == {}
