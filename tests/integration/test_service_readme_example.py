"""The README's embedding examples run as written on a fresh clone (so they cannot rot): extracted and executed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_examples(section: str) -> list[str]:
    """The ``python`` code blocks of the README section under the heading ``section`` (its subsections included)."""
    text = README.read_text(encoding="utf-8")
    after = text[text.index(f"\n## {section}\n") + 1 :]
    body = after[: after.find("\n## ")]
    return re.findall(r"```python\n(.*?)```", body, re.DOTALL)


def readme_example(section: str) -> str:
    """The first ``python`` code block of the README section ``section``."""
    examples = readme_examples(section)
    assert examples, f"no python block under {section!r}"
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
    lines = run_example(tmp_path, readme_examples("Embedding in a Trio program")[0])
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
    examples = readme_examples("Embedding in a Trio program")
    assert len(examples) == 2
    lines = run_example(tmp_path, examples[1])
    assert lines[0].startswith('北京: {"city":"Beijing"')
    assert lines[1] == "['tool_calls', 'stop']"
