"""``yao-actors chat`` imports only what a client needs (issue 34, item 9): building the command line's parser and
reading a ``chat`` command import neither the service, the runtime, the configuration reader nor the MCP SDK; each of
the other commands imports its module when it runs."""

from __future__ import annotations

import json
import subprocess
import sys

#: What a client of the service has no use for.
HEAVY = (
    "mcp", "jsonschema", "prometheus_client", "httpx2", "opentelemetry", "pydantic", "yao_actors.runtime",
    "yao_actors.config", "yao_actors.service.frontend", "yao_actors.conversation", "yao_actors.cli.serving",
    "yao_actors.cli.probe_commands", "yao_actors.bench.runner",
)  # fmt: skip
PROBE = """
import json, sys
from yao_actors.cli.commands import _parser
args = _parser().parse_args(sys.argv[1:])
print(json.dumps(sorted(sys.modules)))
"""


def modules_after_parsing(*argv: str) -> set[str]:
    """The modules a fresh interpreter holds once the parser has read ``argv`` (the command is not run)."""
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True, timeout=60)
    return set(json.loads(done.stdout))


def test_chat_and_history_import_no_service_runtime_or_sdk() -> None:
    for argv in (["chat", "hello"], ["history", "t-1"]):
        loaded = modules_after_parsing(*argv)
        assert "yao_actors.cli.chat" in loaded
        assert [name for name in HEAVY if name in loaded] == []


def test_the_other_commands_import_their_modules_when_they_run() -> None:
    assert "yao_actors.cli.serving" not in modules_after_parsing("serve", "--port", "0")
    done = subprocess.run(
        [sys.executable, "-m", "yao_actors.cli", "config", "schema"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    assert json.loads(done.stdout)["title"] == "yao-actors configuration"
