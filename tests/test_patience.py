"""A store call tried again while the store is out of reach, within its patience."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from yao_actors.errors import StoreUnavailable, UnknownThread
from yao_actors.tasks import PATIENCE, patiently


def flaky(failures: int) -> tuple[list[float], object]:
    tries: list[float] = []

    async def call() -> str:
        tries.append(trio.current_time())
        await trio.lowlevel.checkpoint()
        if len(tries) <= failures:
            raise StoreUnavailable("out of reach")
        return "answered"

    return tries, call


async def test_a_store_back_within_the_patience_answers(autojump_clock: trio.testing.MockClock) -> None:
    tries, call = flaky(3)
    assert await patiently(call) == "answered"  # type: ignore[arg-type]
    assert len(tries) == 4
    assert tries[-1] < PATIENCE


async def test_a_store_out_of_reach_past_the_patience_raises_its_last_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tries, call = flaky(1000)
    with pytest.raises(StoreUnavailable, match="out of reach"):
        await patiently(call, 5.0)  # type: ignore[arg-type]
    assert 3.5 < tries[-1] <= 5.0  # tried until the next try would have been past the patience


async def test_other_errors_are_not_tried_again() -> None:
    tries = 0

    async def call() -> None:
        nonlocal tries
        tries += 1
        await trio.lowlevel.checkpoint()
        raise UnknownThread("thread 't' was not opened")

    with pytest.raises(UnknownThread):
        await patiently(call)
    assert tries == 1
