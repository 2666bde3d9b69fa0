"""Tools the ``max_tools`` cap leaves out are said where the user looks (issue 34, item 3): ``/readyz`` and each run's
``server_status`` events name the servers and the tools, over real stdio servers and a real service."""

from __future__ import annotations

import sys

import trio

from tests.service.support import http_request, running_service
from yao_actors.config import parse_config
from yao_actors.runtime import open_runtime

#: Two real stdio servers; the assistant's cap of 3 takes three of the test server's tools and leaves weather out.
CONFIG = {
    "mcpServers": {
        "test": {"command": sys.executable, "args": ["-m", "yao_actors.testing.servers", "--name", "test"]},
        "weather": {"command": sys.executable, "args": ["-m", "yao_actors.demo.weather"]},
    },
    "assistants": {
        "capped": {"model": "demo", "max_tools": 3, "mcp": {"servers": [{"test": ["echo", "add", "sleep", "fail"]},
                                                                          "weather"]}},
        "roomy": {"model": "demo", "mcp": {"servers": ["weather"]}},
    },
}  # fmt: skip
CAP = "the assistant's max_tools (3) was reached"
NOT_OFFERED = {
    "capped": {
        "test": f"{CAP}: not offered: fail",
        "weather": f"{CAP} before this server: none of its tools offered",
    }
}


async def test_readyz_and_the_runs_events_say_which_tools_the_cap_leaves_out() -> None:
    config = parse_config(CONFIG)
    with trio.fail_after(60):
        async with open_runtime(config, ready_timeout=30) as runtime:
            assert await runtime.tools_not_offered() == NOT_OFFERED
            assert [entry.name for entry in (await runtime.catalog("capped")).entries] == [
                "test__echo",
                "test__add",
                "test__sleep",
            ]
            async with running_service(runtime) as service:
                ready = await http_request(service.port, "/readyz")
            capped = await runtime.run("capped", "hello")
            roomy = await runtime.run("roomy", "hello")
    assert ready.status == 200  # the cap does not change readiness
    assert ready.json()["tools_not_offered"] == NOT_OFFERED
    statuses = [e["value"] for e in capped.events if e.get("type") == "CUSTOM" and e["name"] == "server_status"]
    assert statuses == [
        {"server": "test", "state": "tools_capped", "detail": NOT_OFFERED["capped"]["test"]},
        {"server": "weather", "state": "tools_capped", "detail": NOT_OFFERED["capped"]["weather"]},
    ]
    assert not [e for e in roomy.events if e.get("type") == "CUSTOM" and e["name"] == "server_status"]
