"""The documentation builds in strict mode: a warning, a broken link or a reference that names nothing fails the test."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def sphinx(source: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``sphinx-build`` as CI would run it: every warning an error (``-W``), all reported (``--keep-going``), and
    nitpicky (``-n``: every reference written in a page must resolve). The ``dummy`` builder reads and resolves
    everything the HTML builder does without writing pages."""
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "dummy", "-W", "--keep-going", "-n", "-q", "-E", str(source), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_docs_build_without_a_warning(tmp_path: Path) -> None:
    done = sphinx(DOCS, tmp_path / "out")
    assert done.returncode == 0, done.stderr


def test_a_broken_reference_fails_the_build(tmp_path: Path) -> None:
    """The strict mode is real: the same configuration refuses a page that links to nothing."""
    source = tmp_path / "docs"
    source.mkdir()
    shutil.copy(DOCS / "conf.py", source / "conf.py")
    (source / "index.md").write_text(
        "# Title\n\nSee [the missing page](missing.md) and {py:func}`yao_actors.no_such_function`.\n", encoding="utf-8"
    )
    done = sphinx(source, tmp_path / "out")
    assert done.returncode != 0
    assert "missing.md" in done.stderr
    assert "yao_actors.no_such_function" in done.stderr
