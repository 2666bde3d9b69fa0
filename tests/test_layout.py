"""The package's shape: no import circle between its modules, and no module grown past what a reader can hold.

The import graph is read from the source (every ``import`` statement, also those
inside functions): importing ``a.b.c`` from outside package ``a.b`` runs
``a/b/__init__.py`` too, so that counts as an import of ``a.b`` as well. The root
package is left out of that rule: it only re-exports, and is always entered first.
"""

from __future__ import annotations

import ast
import pathlib
import re

import mcp
import pytest

import yao_actors

ROOT = pathlib.Path(yao_actors.__file__).parent


def _modules() -> dict[str, pathlib.Path]:
    modules = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = ["yao_actors", *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _package_of(module: str, modules: dict[str, pathlib.Path]) -> str:
    return module if modules[module].name == "__init__.py" else module.rpartition(".")[0]


def _imports(module: str, modules: dict[str, pathlib.Path]) -> set[str]:
    """The package's modules that importing ``module`` runs directly."""
    named: set[str] = set()
    for node in ast.walk(ast.parse(modules[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            named.add(node.module)
            named.update(f"{node.module}.{alias.name}" for alias in node.names)
    targets = {name for name in named if name in modules}
    own_package = _package_of(module, modules)
    for target in list(targets):
        parent = target.rpartition(".")[0]
        while parent not in ("", "yao_actors"):
            if not (own_package == parent or own_package.startswith(parent + ".")):
                targets.add(parent)
            parent = parent.rpartition(".")[0]
    targets.discard(module)
    targets.discard("yao_actors")
    return targets


def _find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` as the list of modules along it, or ``None``."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return [*path[path.index(target) :], target]
            if target not in state and (circle := visit(target)):
                return circle
        state[module] = "done"
        path.pop()
        return None

    for module in sorted(graph):
        if module not in state and (circle := visit(module)):
            return circle
    return None


def test_no_module_of_the_package_imports_itself_back() -> None:
    modules = _modules()
    graph = {module: _imports(module, modules) for module in modules}
    circle = _find_circle(graph)
    assert circle is None, "import circle: " + " -> ".join(circle or ())


def test_the_circle_finder_finds_a_circle() -> None:
    assert _find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _find_circle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("module", sorted(_modules()))
def test_every_module_says_its_one_idea_first(module: str) -> None:
    """A module opens with a docstring whose first line says what it is for: one idea, named."""
    docstring = ast.get_docstring(ast.parse(_modules()[module].read_text(encoding="utf-8")))
    assert docstring, f"{module} has no docstring"
    first = docstring.splitlines()[0]
    assert len(first.split()) >= 3, f"{module}: its docstring's first line names no idea: {first!r}"


def _long_functions(source: str, limit: int) -> list[tuple[str, int]]:
    """The functions of ``source`` whose code (their docstring left out) runs over ``limit`` lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if ast.get_docstring(node) is not None:
                body = body[1:]
            if body and (length := (body[-1].end_lineno or 0) - body[0].lineno + 1) > limit:
                found.append((node.name, length))
    return found


def test_no_function_is_longer_than_a_reader_can_hold() -> None:
    offenders = {
        module: long for module, path in _modules().items() if (long := _long_functions(path.read_text("utf-8"), 60))
    }
    assert offenders == {}


def test_no_module_is_longer_than_500_lines() -> None:
    """A module past 500 lines holds more than one idea: split it by idea, not by line count."""
    long = {module: n for module, path in _modules().items() if (n := len(path.read_text("utf-8").splitlines())) > 500}
    assert long == {}


def test_the_function_measure_leaves_docstrings_out() -> None:
    source = "def f():\n    'doc'\n" + "    x = 1\n" * 60 + "def g():\n" + "    x = 1\n" * 61
    assert _long_functions(source, 60) == [("g", 61)]


def _private_dependency_imports(module: str, modules: dict[str, pathlib.Path]) -> list[str]:
    """The modules of other packages that ``module`` imports although their names mark them private."""
    found = []
    for node in ast.walk(ast.parse(modules[module].read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        found += [
            name
            for name in names
            if not name.startswith(("yao_actors", "__future__"))
            and any(part.startswith("_") for part in name.split("."))
        ]
    return found


@pytest.mark.parametrize("module", sorted(_modules()))
def test_no_module_imports_a_private_module_of_a_dependency(module: str) -> None:
    assert _private_dependency_imports(module, _modules()) == []


def test_no_module_reads_a_private_attribute_of_a_dependency_object() -> None:
    """``getattr(obj, "_name")`` is how a private attribute hides from the import check."""
    offenders = [
        f"{module}:{node.lineno}"
        for module, path in _modules().items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) > 1
        and not (isinstance(node.args[0], ast.Name) and node.args[0].id == "self")  # its own attribute
        and isinstance(node.args[1], ast.Constant)
        and str(node.args[1].value).startswith("_")
    ]
    assert offenders == []


TESTS = pathlib.Path(__file__).parent
ARCHITECTURE_PAGE = TESTS.parent / "docs" / "architecture.md"


def test_no_test_monkeypatches_an_object() -> None:
    """Collaborators are injected (``connect=``, ``models=``, ``line_limits``); tests patch only the environment."""
    offenders = [
        f"{path.name}:{node.lineno}"
        for path in sorted(TESTS.rglob("*.py"))
        if "node_modules" not in path.parts  # the Node packages the tests install (a Node build ships Python)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and node.attr in ("setattr", "setitem", "delattr")
        and isinstance(node.value, ast.Name)
        and node.value.id == "monkeypatch"
    ]
    assert offenders == []


def test_the_architecture_pages_layout_names_every_module_of_the_package_once() -> None:
    text = ARCHITECTURE_PAGE.read_text(encoding="utf-8")
    block = text[text.index("## Layout") :].split("```")[1]
    listed = re.findall(r"^  (\S+)", block.split("yao_actors/\n", 1)[1], flags=re.MULTILINE)
    tree = sorted(
        f"{path.name}/" if path.is_dir() else path.name
        for path in ROOT.iterdir()
        if (path.is_dir() and (path / "__init__.py").exists())
        or (path.suffix in (".py", ".json") and path.name != "__init__.py")
    )
    assert sorted(listed) == tree


#: The methods of the MCP SDK's client and session: assigning one on another object replaces the SDK's behaviour.
_SDK_METHODS = frozenset(
    name
    for cls in (mcp.Client, mcp.ClientSession)
    for name in dir(cls)
    if not name.startswith("__") and callable(getattr(cls, name))
)


def _is_sdk(module: str) -> bool:
    return module.split(".")[0] in ("mcp", "mcp_types")


def _sdk_assignments(source: str) -> list[int]:
    """The lines of ``source`` that assign an attribute of the SDK: on a name imported from ``mcp`` (a module or
    class), or a method of the SDK's client or session on another object than ``self`` (a session's method,
    replaced); ``setattr`` too."""
    tree = ast.parse(source)
    sdk_names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            sdk_names |= {(a.asname or a.name).split(".")[0] for a in node.names if _is_sdk(a.name)}
        elif isinstance(node, ast.ImportFrom) and _is_sdk(node.module or ""):
            sdk_names |= {a.asname or a.name for a in node.names}

    def root(node: ast.expr) -> str | None:
        while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
            node = node.func if isinstance(node, ast.Call) else node.value
        return node.id if isinstance(node, ast.Name) else None

    lines = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            targets = [ast.Attribute(node.args[0], "?")] if node.args else []
        for target in targets:
            if not isinstance(target, ast.Attribute):
                continue
            on_other = not (isinstance(target.value, ast.Name) and target.value.id == "self")
            if root(target.value) in sdk_names or (on_other and target.attr in _SDK_METHODS):
                lines.append(node.lineno)
    return lines


def test_no_module_assigns_an_attribute_of_the_sdk() -> None:
    """The SDK is changed only where it lets a subclass change it, never by replacing what it holds."""
    offenders = [
        f"{module}:{line}"
        for module, path in _modules().items()
        for line in _sdk_assignments(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_sdk_assignment_check_finds_one() -> None:
    patched = "import mcp.client.session\nmcp.client.session.DISCOVER_TIMEOUT_SECONDS = 2\n"
    replaced = "client.session.validate_tool_result = check\n"
    own = "import mcp\nclass A:\n    def __init__(self):\n        self.discover = 2\n"
    assert _sdk_assignments(patched) == [2]
    assert _sdk_assignments(replaced) == [1]
    assert _sdk_assignments(own) == []
