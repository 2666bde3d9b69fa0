"""Two ``server.py`` workers of one config behind a real HAProxy that routes by a query parameter (``?worker=a`` /
``?worker=b``): which worker a connection lands on is the test's choice. The model is the fake OpenAI endpoint in the
test's process; the store (Redis, for both to share) and the MCP servers are the test's."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from tests.integration.processes import service_process, write_config
from tests.integration.scale_support import HAPROXY_DEFAULTS, open_haproxy
from yao_actors.testing.fake_openai import FakeOpenAI, Script, open_fake_openai

#: HAProxy in front of worker A, or of worker B for a URL with ``?worker=b``.
PICKED_WORKER = (
    "global\n    maxconn 200\n"
    + HAPROXY_DEFAULTS
    + """frontend yao
    bind 127.0.0.1:{front}
    use_backend worker_b if {{ urlp(worker) -m str b }}
    default_backend worker_a
backend worker_a
    server a 127.0.0.1:{a}
backend worker_b
    server b 127.0.0.1:{b}
"""
)


def port_of(url: str) -> int:
    match = re.search(r":(\d+)/", url)
    assert match, url
    return int(match.group(1))


@attrs.frozen
class TwoWorkers:
    """What :func:`two_service_workers` started: HAProxy's URL, the workers' processes, the fake model."""

    front: str
    a: trio.Process
    b: trio.Process
    fake: FakeOpenAI


@asynccontextmanager
async def two_service_workers(
    tmp_path: Path,
    model: Script,
    servers: dict[str, Any],
    store: dict[str, Any],
    settings: dict[str, Any] | None = None,
) -> AsyncIterator[TwoWorkers]:
    """Workers A and B of one config (``servers``, ``store``, and ``settings`` added at its top level) with
    ``model`` as their model, and HAProxy in front of both; all stopped at the end."""
    async with open_fake_openai(model) as fake:
        config = write_config(tmp_path, fake.base_url, servers, store)
        if settings:
            config.write_text(json.dumps(json.loads(config.read_text(encoding="utf-8")) | settings), encoding="utf-8")
        async with (
            service_process(config) as (a, url_a),
            service_process(config) as (b, url_b),
            open_haproxy(tmp_path, PICKED_WORKER, a=port_of(url_a), b=port_of(url_b)) as front,
        ):
            yield TwoWorkers(front, a, b, fake)
