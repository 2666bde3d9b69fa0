"""What a Redis store says when it fails: never the password of its URL (the message reaches logs and clients)."""

from __future__ import annotations

import pytest
import trio

from yao_actors.errors import StoreUnavailable
from yao_actors.store.redis import open_redis_store, shown_url
from yao_actors.testing.redis_server import free_port


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("redis://app:s3cret@redis.internal:6380/2", "redis://app:***@redis.internal:6380/2"),
        ("rediss://app:p%40ss@host/0", "rediss://app:***@host/0"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://app@host/0", "redis://app@host/0"),
    ],
)
def test_a_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert shown_url(url) == shown


async def test_a_store_out_of_reach_names_its_url_without_the_password() -> None:
    url = f"redis://app:s3cret-password@127.0.0.1:{free_port()}/0"  # nobody listens there
    with trio.fail_after(30), pytest.raises(StoreUnavailable) as raised:
        async with open_redis_store(url):
            pass  # pragma: no cover
    message = str(raised.value)
    assert "s3cret-password" not in message
    assert "redis://app:***@127.0.0.1:" in message
