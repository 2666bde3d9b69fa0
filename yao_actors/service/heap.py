"""The service process's garbage collector: what start-up made is kept out of the collector's passes.

A started service holds some 10^5 long-lived objects that CPython's cyclic collector tracks: the imported modules,
the MCP SDK's schemas, every server's client and its idle workers. Each full (oldest-generation) collection walks them
all, and under load there are several a second, each stopping the event loop for tens of milliseconds (a wave of
`benchmarks/ws_load.py` saw 50-130 ms pauses, about a tenth of the service's CPU). :func:`keep_heap` collects once
and then freezes what is alive (``gc.freeze``): the collector's passes then walk only what runs make. It also makes
the young passes rarer (:data:`YOUNG_THRESHOLD`), which under load mostly walked runs still in flight.

Frozen objects are still freed by reference counting, but the cyclic collector never looks at them: an object
alive at a freeze that later becomes part of cyclic garbage would stay (a server restarting leaves its old client's
objects, a run in flight at the freeze its own). So the freeze is renewed every ``period`` seconds: unfreeze, one
full collection (what a default collector does several times a second under load), freeze again. Such garbage lives
at most one period.

Only a process that owns its heap should do this: ``yao-actors serve`` (and ``server.py``) run :func:`keep_heap`
beside the service; the embedded runtime (:func:`yao_actors.open_runtime`) leaves the collector to its embedder, who
may start :func:`keep_heap` in their own nursery (one at a time). A collector switched off (``gc.disable()``, or a
young threshold of 0) is left off: :func:`keep_heap` then does nothing. The figures are CPython 3.11's (three
generations); from 3.14 the collector is incremental and the threshold means less.
"""

from __future__ import annotations

import gc
import logging
from typing import NoReturn

import trio

DEFAULT_PERIOD = 300.0
"""Seconds between two renewals of the freeze: how long cyclic garbage among frozen objects can live."""

YOUNG_THRESHOLD = 20_000
"""The youngest generation's threshold while :func:`keep_heap` runs (CPython's default: 700 allocations).

Under load a service keeps the objects of hundreds of runs alive; at 700 the collector ran a young pass every few
hundred microseconds, promoted what was still in flight, and walked it again in the older generations (in a
``ws_load`` wave after the freeze: ~1 ms of CPU per run, 270 passes). At 20,000 it makes a dozen passes of a few
milliseconds, most of what they meet already gone (~0.3 ms per run)."""

logger = logging.getLogger(__name__)

_keeping = False  # one keep_heap at a time: the collector is the process's


def refreeze() -> int:
    """Unfreeze, collect everything, freeze what is alive; the number of unreachable objects found."""
    gc.unfreeze()
    found = gc.collect()
    gc.freeze()
    return found


async def keep_heap(
    period: float = DEFAULT_PERIOD, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> NoReturn:
    """Freeze what is alive now out of the collector's passes, then renew the freeze every ``period`` seconds.

    While it runs, the youngest generation's threshold is at least :data:`YOUNG_THRESHOLD`. Start it once the
    service has started (its servers connected), so that start-up is what gets frozen; ``task_status.started()`` is
    called after the first freeze. Cancelled, it puts back the thresholds it found, and unfreezes, or, if something
    was frozen when it started (an embedder's own ``gc.freeze()``), freezes again what is alive. With the collector
    switched off (``gc.disable()`` or a young threshold of 0) it changes nothing and only waits. Raises
    ``RuntimeError`` if another :func:`keep_heap` is running in the process.
    """
    global _keeping
    if not period > 0:
        raise ValueError(f"keep_heap: period must be a positive number of seconds, got {period!r}")
    if _keeping:
        raise RuntimeError("keep_heap is already running in this process: the collector is the process's, keep one")
    _keeping = True
    try:
        if not gc.isenabled() or gc.get_threshold()[0] == 0:
            logger.info("the garbage collector is switched off: keep_heap leaves it so")
            task_status.started()
            await trio.sleep_forever()
        await _keep(period, task_status)
    finally:
        _keeping = False


async def _keep(period: float, task_status: trio.TaskStatus[None]) -> NoReturn:
    """:func:`keep_heap`'s work on a collector that is on: freeze, renew, and put things back when cancelled."""
    thresholds = gc.get_threshold()
    was_frozen = gc.get_freeze_count() > 0
    try:
        gc.set_threshold(max(thresholds[0], YOUNG_THRESHOLD), *thresholds[1:])
        refreeze()
        frozen = gc.get_freeze_count()  # a walk of the frozen objects: here, and at a renewal only when debugging
        logger.info(
            "froze %d start-up objects out of the garbage collector's passes (renewed every %g s)",
            frozen,
            period,
            extra={"frozen": frozen, "period": period},
        )
        task_status.started()
        while True:
            await trio.sleep(period)
            found = refreeze()
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug(
                    "renewed the freeze: %d unreachable objects freed, %d frozen", found, gc.get_freeze_count()
                )
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        if was_frozen:
            gc.freeze()
