"""What environment a stdio server gets (issue 12, item 12): ``env`` over the MCP SDK's minimal default environment,
or over the parent's whole environment with ``inherit_env``. A real child process reports what it sees."""

from __future__ import annotations

import sys

import pytest
import trio

from yao_actors.config import StdioTransport, parse_config
from yao_actors.transports import Link, open_stdio_transport

REPORT = (
    "import os, sys; "
    "sys.stderr.write(f\"{os.environ.get('YAO_TEST_PARENT_SECRET', 'absent')} {os.environ.get('GIVEN', 'absent')} "
    "{'PATH' in os.environ}\\n\"); sys.stderr.flush(); sys.exit(3)"
)


async def what_the_child_sees(params: StdioTransport) -> str:
    link = Link()
    with trio.fail_after(30):
        async with open_stdio_transport(params, link):
            await link.lost.wait()
    assert link.exit_code == 3
    return link.stderr_tail().strip()


@pytest.mark.parametrize(("inherit", "expected"), [(False, "absent given True"), (True, "s3cret given True")])
async def test_env_is_laid_over_the_minimal_environment_unless_inherit_env(
    monkeypatch: pytest.MonkeyPatch, inherit: bool, expected: str
) -> None:
    monkeypatch.setenv("YAO_TEST_PARENT_SECRET", "s3cret")
    entry = {"command": sys.executable, "args": ["-c", REPORT], "env": {"GIVEN": "given"}}
    if inherit:
        entry["inherit_env"] = True
    spec = parse_config({"mcpServers": {"s": entry}}).servers["s"]
    assert isinstance(spec.transport, StdioTransport)
    assert spec.transport.inherit_env is inherit
    assert await what_the_child_sees(spec.transport) == expected
