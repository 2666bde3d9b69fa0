"""A client that leaves its run: read the run's events up to one of a type, then detach (the run goes on)."""

from __future__ import annotations

from typing import Any

from yao_actors.runtime import Runtime


async def seen_until_detached(runtime: Runtime, question: str, at: str, **ids: str) -> list[dict[str, Any]]:
    """Start a run of assistant ``a`` on ``question`` (``ids``: ``thread_id``, ``run_id``), read its events up to
    and with the first of type ``at``, then detach; the events read."""
    seen: list[dict[str, Any]] = []
    async with runtime.open_run("a", question, **ids) as stream:
        async for event in stream:
            seen.append(event)
            if event["type"] == at:
                stream.detach()
                break
    return seen
