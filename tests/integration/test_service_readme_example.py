"""The README's embedding example runs as written on a fresh clone (so it cannot rot): extracted and executed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example(section: str) -> str:
    """The first ``python`` code block after the heading ``section`` in README.md."""
    text = README.read_text(encoding="utf-8")
    after = text[text.index(f"\n## {section}\n") :]
    match = re.search(r"```python\n(.*?)```", after, re.DOTALL)
    assert match is not None, f"no python block under {section!r}"
    return match.group(1)


def test_the_embedding_example_runs_as_written(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(readme_example("Embedding in a Trio program"), encoding="utf-8")
    # A fresh clone: an empty directory, no config file, no model endpoint or token in the environment.
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "REMOTE_", "YAO_ACTORS_"))}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("{'city': 'Beijing'")  # the weather server's answer, no error
    assert "None None" in lines[0]
    assert "answered" in lines[1]
    assert "clothing__advise" in lines[1]
    assert lines[2] == "RUN_STARTED"
    assert lines[-1] == "RUN_FINISHED"
