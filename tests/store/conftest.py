"""Fixtures of the store tests: a shared real redis-server, a movable clock, and one store per backend."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import attrs
import pytest

from tests.support import require_tool
from yao_actors.store import ConversationStore, StoreSpec, open_store
from yao_actors.testing.redis_server import REDIS_SERVER, RedisServer


@attrs.define
class Clock:
    """POSIX time that only moves when a test moves it."""

    now: float = 1_800_000_000.0

    def __call__(self) -> float:
        self.now += 0.001  # every reading is later than the last: creation order is time order
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    require_tool(REDIS_SERVER, "redis-server")
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def clock() -> Clock:
    return Clock()


BACKENDS = ("memory", "sqlite", "redis")


@pytest.fixture(params=BACKENDS)
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSpec:
    """A store of each backend; Redis stores of different tests are kept apart by their prefix."""
    if request.param == "memory":
        return StoreSpec("memory")
    if request.param == "sqlite":
        return StoreSpec.sqlite(tmp_path / "state" / "conversations.sqlite3")
    server: RedisServer = request.getfixturevalue("redis_server")
    return StoreSpec("redis", url=server.url, prefix=f"test-{uuid.uuid4().hex[:8]}:")


@pytest.fixture
async def store(spec: StoreSpec, clock: Clock) -> AsyncIterator[ConversationStore]:
    async with open_store(spec, clock=clock) as opened:
        yield opened
