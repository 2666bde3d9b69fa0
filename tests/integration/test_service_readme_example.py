"""The embedding page's examples run as written on a fresh clone (so they cannot rot): extracted and executed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def page_examples(page: str) -> list[str]:
    """The ``python`` code blocks of the docs page ``page`` (``docs/<page>.md``), in order."""
    text = (DOCS / f"{page}.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.DOTALL)


def page_example(page: str) -> str:
    """The first ``python`` code block of the docs page ``page``."""
    examples = page_examples(page)
    assert examples, f"no python block in docs/{page}.md"
    return examples[0]


def run_example(tmp_path: Path, code: str) -> list[str]:
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    # A fresh clone: an empty directory, no config file, no model endpoint or token in the environment.
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "REMOTE_", "YAO_ACTORS_"))}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_embedding_example_runs_as_written(tmp_path: Path) -> None:
    lines = run_example(tmp_path, page_examples("embedding")[0])
    assert lines[0].startswith("True {'city': 'Beijing'")  # the weather server's answer, no error
    assert "None None" in lines[0]
    assert "clothing__advise" in lines[1]
    assert "穿" in lines[1]  # the answer, in the user's language
    assert lines[2] == "RUN_STARTED"
    assert lines[-2] == "RUN_FINISHED"
    threads, kept = lines[-1].rsplit(" ", 1)
    assert threads.startswith("['")
    assert threads.endswith(", 't1']")
    assert kept == "6"  # t1 keeps the question, two tool-call messages with their results, and the answer


def test_the_scripted_model_example_runs_as_written(tmp_path: Path) -> None:
    examples = page_examples("embedding")
    assert len(examples) == 2
    lines = run_example(tmp_path, examples[1])
    assert lines[0].startswith('北京: {"city":"Beijing"')
    assert lines[1] == "['tool_calls', 'stop']"
