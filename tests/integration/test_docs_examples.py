"""Every code block the docs mark runnable runs as printed: in a fresh folder, with the files the page gives.

The markers, an HTML comment on the line before a fenced block (invisible in the rendered page):

- ``<!-- file: PATH -->``: the block is a file the page's examples need, written to ``PATH`` in the folder;
- ``<!-- run -->``: the block runs there (``python`` with Python, ``bash`` with bash), and must exit 0;
- ``<!-- run: service -->``: the same, against a real ``server.py`` (the embedded default) on a free port: the
  block's ``http://127.0.0.1:8765`` is that service's address; a ``ts`` block runs with Node and the official
  ``@ag-ui/client`` of ``tests/node``; ``<!-- run: service twice -->`` runs it twice against the one service, as a
  reader trying it again does (the second run must not collide with the first);
- ``<!-- run: tested in tests/... -->``: the named test runs the block and checks what it prints.

A run marker may end with ``| prints: TEXT``: the block's standard output must contain ``TEXT``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
NODE_MODULES = REPO / "tests" / "node" / "node_modules"
DEFAULT_URL = "http://127.0.0.1:8765"
MARKED = re.compile(r"^<!-- (run|file)\b(.*?) -->\n```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


@attrs.frozen
class Block:
    page: str
    kind: str  # "run" or "file"
    argument: str  # what follows the marker's colon
    language: str
    code: str

    @property
    def service(self) -> bool:
        return self.argument.split("|")[0].split()[:1] == ["service"]

    @property
    def times(self) -> int:
        """How many times the block runs (against one service)."""
        return 2 if self.argument.split("|")[0].split()[1:] == ["twice"] else 1

    @property
    def prints(self) -> str | None:
        _, found, text = self.argument.partition("prints:")
        return text.strip() if found else None


def marked_blocks() -> list[Block]:
    return [
        Block(page.name, kind, argument.strip().removeprefix(":").strip(), language, code)
        for page in sorted(DOCS.glob("*.md"))
        for kind, argument, language, code in MARKED.findall(page.read_text(encoding="utf-8"))
    ]


BLOCKS = marked_blocks()
RUNNABLE = [b for b in BLOCKS if b.kind == "run" and not b.argument.startswith("tested in ")]


def test_the_markers_are_found_and_each_names_what_runs_it() -> None:
    """A marker that names no block, or a test that does not exist, is a mistake in the page."""
    for page in DOCS.glob("*.md"):
        text = page.read_text(encoding="utf-8")
        assert text.count("<!-- run") + text.count("<!-- file:") == sum(1 for b in BLOCKS if b.page == page.name)
    for block in BLOCKS:
        if block.argument.startswith("tested in "):
            test = REPO / block.argument.removeprefix("tested in ").split()[0]
            assert test.is_file(), block.argument
            assert block.page.removesuffix(".md") in test.read_text(encoding="utf-8")
    assert {b.page for b in RUNNABLE} >= {"durability.md", "http.md", "tools.md"}


def fresh_environment() -> dict[str, str]:
    """A user's shell on a fresh clone: no model endpoint or token, the interpreter's scripts on PATH."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "REMOTE_", "YAO_ACTORS_"))}
    environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environ.get('PATH', '')}"
    return environ


@contextmanager
def running_service() -> Iterator[str]:
    """``python server.py`` (the embedded default, threads in memory) on a free port; yields its base URL."""
    process = subprocess.Popen(
        [sys.executable, "server.py", "--port", "0", "--store", "memory"],
        cwd=REPO,
        env=fresh_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()  # printed once it serves
        match = re.search(r"http://127\.0\.0\.1:\d+", banner)
        assert match, banner
        yield match.group()
    finally:
        process.terminate()
        try:
            process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def command_for(block: Block, folder: Path) -> list[str]:
    if block.language == "python":
        (folder / "example.py").write_text(block.code, encoding="utf-8")
        return [sys.executable, "example.py"]
    if block.language == "bash":
        return ["bash", "-euo", "pipefail", "-c", block.code]
    if block.language == "ts":  # written so that Node runs it as a module
        if shutil.which("node") is None or not (NODE_MODULES / "@ag-ui" / "client").is_dir():
            if os.environ.get("CI") == "true":
                pytest.fail("needs Node and @ag-ui/client: npm ci --prefix tests/node")
            pytest.skip("needs Node and @ag-ui/client: run `npm ci --prefix tests/node` (.ci/run does)")
        (folder / "node_modules").symlink_to(NODE_MODULES, target_is_directory=True)
        (folder / "example.mjs").write_text(block.code, encoding="utf-8")
        return ["node", "example.mjs"]
    raise AssertionError(f"{block.page}: no way to run a {block.language!r} block")


@pytest.mark.parametrize(
    "block", RUNNABLE, ids=[f"{b.page}-{i}-{b.language}" for i, b in enumerate(RUNNABLE)]
)  # fmt: skip
def test_the_runnable_block_runs_as_printed(block: Block, tmp_path: Path) -> None:
    for needed in BLOCKS:
        if needed.kind == "file" and needed.page == block.page:
            path = tmp_path / needed.argument
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(needed.code, encoding="utf-8")
    if block.service:
        with running_service() as base:
            served = attrs.evolve(block, code=block.code.replace(DEFAULT_URL, base))
            runs = [run(served, tmp_path) for _ in range(block.times)]
    else:
        runs = [run(block, tmp_path)]
    for done in runs:
        assert done.returncode == 0, f"{block.page}:\n{block.code}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        if block.prints is not None:
            assert block.prints in done.stdout, done.stdout


def run(block: Block, folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command_for(block, folder),
        cwd=folder,
        env=fresh_environment(),
        capture_output=True,
        text=True,
        timeout=180,
    )
