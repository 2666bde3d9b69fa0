"""The service's heap keeper: start-up frozen out of the collector's passes, the freeze renewed so garbage goes."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
import trio
import trio.testing

from yao_actors.service.heap import DEFAULT_PERIOD, YOUNG_THRESHOLD, keep_heap, refreeze


class Node:
    """A collectable object that can be part of a reference cycle and be watched through a weak reference."""

    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> tuple[Node, weakref.ref[Node]]:
    first, second = Node(), Node()
    first.other, second.other = second, first
    return first, weakref.ref(first)


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    """Each test starts and ends with nothing frozen and the thresholds it found, collector on (it is the process's)."""
    thresholds = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    gc.enable()


async def test_what_is_alive_at_start_is_frozen_and_its_garbage_goes_at_the_next_renewal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    strong, watched = cycle()
    async with trio.open_nursery() as nursery:
        await nursery.start(keep_heap, 10.0)
        assert gc.get_freeze_count() > 0
        del strong
        gc.collect()
        assert watched() is not None, "a frozen cycle is not collected"
        await trio.sleep(9.0)
        gc.collect()
        assert watched() is not None, "not before the period is over"
        await trio.sleep(2.0)
        assert watched() is None, "the renewal collects what became garbage since the freeze"
        assert gc.get_freeze_count() > 0, "and freezes again"
        nursery.cancel_scope.cancel()


async def test_while_it_runs_young_passes_are_rarer_and_cancelled_it_leaves_the_collector_as_it_was(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gc.set_threshold(700, 11, 12)
    async with trio.open_nursery() as nursery:
        await nursery.start(keep_heap)
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 11, 12)
        nursery.cancel_scope.cancel()
    assert gc.get_threshold() == (700, 11, 12)
    assert gc.get_freeze_count() == 0


async def test_a_larger_young_threshold_of_the_embedder_is_kept(autojump_clock: trio.testing.MockClock) -> None:
    gc.set_threshold(YOUNG_THRESHOLD * 5, 10, 10)
    async with trio.open_nursery() as nursery:
        await nursery.start(keep_heap)
        assert gc.get_threshold() == (YOUNG_THRESHOLD * 5, 10, 10)
        nursery.cancel_scope.cancel()


async def test_objects_made_after_the_freeze_are_collected_as_usual(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(keep_heap)
        assert gc.isenabled()
        strong, watched = cycle()
        del strong
        # Allocations enough for the collector's own passes: over ten young ones, so one of the next generation too
        # (should a young pass have promoted the cycle before it became garbage).
        kept = [[] for _ in range(12 * YOUNG_THRESHOLD)]
        assert watched() is None
        del kept
        nursery.cancel_scope.cancel()


async def test_garbage_made_before_the_start_is_collected_not_frozen(autojump_clock: trio.testing.MockClock) -> None:
    strong, watched = cycle()
    del strong
    async with trio.open_nursery() as nursery:
        await nursery.start(keep_heap)
        assert watched() is None
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("switch_off", ["disable", "threshold 0"])
async def test_a_collector_switched_off_is_left_off(switch_off: str, autojump_clock: trio.testing.MockClock) -> None:
    if switch_off == "disable":
        gc.disable()
    else:
        gc.set_threshold(0, 10, 10)
    before = gc.get_threshold()
    async with trio.open_nursery() as nursery:
        await nursery.start(keep_heap)
        assert gc.get_threshold() == before
        assert gc.isenabled() is (switch_off != "disable")
        assert gc.get_freeze_count() == 0
        await trio.sleep(DEFAULT_PERIOD * 2)
        assert gc.get_freeze_count() == 0
        nursery.cancel_scope.cancel()
    assert gc.get_threshold() == before


async def test_a_second_keeper_is_refused(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(keep_heap)
        with pytest.raises(RuntimeError, match="already running"):
            await keep_heap()
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        nursery.cancel_scope.cancel()
    async with trio.open_nursery() as nursery:
        await nursery.start(keep_heap)  # the first one ended: a new one may start
        nursery.cancel_scope.cancel()


async def test_a_second_keeper_is_refused_while_the_first_waits_on_a_collector_switched_off(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gc.disable()
    async with trio.open_nursery() as nursery:
        await nursery.start(keep_heap)
        gc.enable()
        with pytest.raises(RuntimeError, match="already running"):
            await keep_heap()
        nursery.cancel_scope.cancel()


async def test_an_embedders_freeze_is_frozen_again_at_the_end(autojump_clock: trio.testing.MockClock) -> None:
    strong, _ = cycle()
    gc.freeze()
    async with trio.open_nursery() as nursery:
        await nursery.start(keep_heap)
        nursery.cancel_scope.cancel()
    assert gc.get_freeze_count() > 0
    del strong


def test_refreeze_frees_frozen_garbage_and_says_how_much() -> None:
    strong, watched = cycle()
    gc.freeze()
    del strong
    assert watched() is not None
    assert refreeze() >= 2
    assert watched() is None
    assert gc.get_freeze_count() > 0


@pytest.mark.parametrize("period", [0, -1.0, float("nan")])
async def test_a_period_that_is_not_positive_is_refused(period: float) -> None:
    thresholds = gc.get_threshold()
    with pytest.raises(ValueError, match="period must be a positive number of seconds"):
        await keep_heap(period)
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == thresholds
