"""The service's budget of runs: ``server.max_runs`` across every connection, detached runs included, and at most
``server.max_runs_per_principal`` of them for any one principal.

The rule is one sentence: a principal may hold at most its share of the runs (:func:`principal_share`: by
default a quarter of ``max_runs`` when the service has several principals), whatever its runs are doing —
streaming, waiting on a tool, or detached and waiting for a ``resume``. So no principal, however it starts and
drops its runs, can take the last free slots from the others. A run refused for its principal's share is
``too_many_runs`` too, with a message that says so (:class:`TooManyRuns`).

A run takes a slot (:class:`RunSlot`) when it is admitted and gives it back when the run ends — when the run is over
in the runtime, not when the client's socket is: a client that stops reading does not keep its run's slot once the
run has ended. ``yao_run_slots_held`` counts the slots taken (a run holds its slot a few steps after
``yao_active_runs`` stops counting it). A run whose client left goes on *detached* (it waits ``server.detach_grace``
seconds for a ``resume``): it keeps its slot until it ends, waited for in the service's nursery, so a client that
starts runs and drops, again and again, cannot hold more than ``max_runs`` of them. Shutdown waits on the budget
(:meth:`RunBudget.wait_idle`) and, after its grace, cancels the detached runs as any other
(:meth:`RunBudget.cancel_detached`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import attrs
import trio

from yao_actors.errors import RunError, RunErrorCode
from yao_actors.observability.metrics import RUN_SLOTS
from yao_actors.specs import ServiceSpec


class TooManyRuns(RunError):
    """A run the budget has no slot for: the service is at ``max_runs``, or (``principal_limit``) the run's
    principal holds its share already (``max_runs_per_principal``)."""

    def __init__(self, message: str, *, principal_limit: bool) -> None:
        super().__init__(message, code=RunErrorCode.TOO_MANY_RUNS)
        self.principal_limit = principal_limit


def principal_share(spec: ServiceSpec, principals: int) -> int:
    """The runs one principal may hold at once: ``server.max_runs_per_principal`` when set; otherwise a quarter
    of ``max_runs`` (at least 1) when the service has ``principals`` > 1, and all of it when it has one (no
    tokens, or a single one: nobody else to keep slots for)."""
    if spec.max_runs_per_principal is not None:
        return spec.max_runs_per_principal
    return max(1, spec.max_runs // 4) if principals > 1 else spec.max_runs


@runtime_checkable
class DetachedRun(Protocol):
    """A run that can go on without its client: detach it, cancel it, wait for its end (a resumed run is not one)."""

    def detach(self) -> None:
        """Stop reading without cancelling the run."""
        ...

    def cancel(self) -> None: ...

    async def wait_done(self) -> None: ...


class EndingRun(Protocol):
    """A run whose end can be waited for (its slot is given back then)."""

    async def wait_done(self) -> None: ...


@attrs.define(eq=False)
class RunSlot:
    """One admitted run's place in the budget; :meth:`release` gives it back (once, however often it is called)."""

    _budget: RunBudget
    principal: str | None
    released: bool = False

    def release(self) -> None:
        """Give the slot back (the run ended, or never started); a second call does nothing."""
        if not self.released:
            self.released = True
            self._budget._give_back(self.principal)

    async def release_when_done(self, run: EndingRun) -> None:
        """Wait for ``run`` to end, then give the slot back (in a task beside whatever relays the run; cancelled,
        it leaves the slot to its owner)."""
        await run.wait_done()
        self.release()


@attrs.define(eq=False)
class RunBudget:
    """The runs in flight across the whole service, at most ``limit``, and at most ``per_principal`` of one
    principal's (``None``: ``limit``); shutdown waits on it until none is left.

    A run whose client left (detached: it waits ``detach_grace`` seconds for a ``resume``) keeps its slot
    until it ends, waited for in ``nursery`` (the service's): otherwise a client that starts runs and drops,
    again and again, would hold any number of them.
    """

    limit: int
    #: Where detached runs are waited for (the service's nursery).
    nursery: trio.Nursery
    per_principal: int | None = None
    active: int = 0
    closing: bool = False
    #: The runs each principal holds (only principals holding some).
    held: dict[str | None, int] = attrs.field(factory=dict, init=False)
    _detached: set[DetachedRun] = attrs.field(factory=set, init=False)
    _changed: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot, init=False)

    def acquire(self, principal: str | None) -> RunSlot:
        """Take a slot for a new run of ``principal``; :class:`TooManyRuns` when the principal holds its share
        already, or the service is at its limit."""
        held = self.held.get(principal, 0)
        share = self.limit if self.per_principal is None else self.per_principal
        if held >= share and share < self.limit:  # a share of all the runs is the service's own limit
            who = "this client's principal" if principal is None else f"principal {principal!r}"
            raise TooManyRuns(
                f"{who} is at its limit of {share} runs in flight (server.max_runs_per_principal; detached runs "
                "count until they end)",
                principal_limit=True,
            )
        if self.active >= self.limit:
            raise TooManyRuns(f"the service is at its limit of {self.limit} runs", principal_limit=False)
        self.active += 1
        RUN_SLOTS.inc()
        self.held[principal] = held + 1
        return RunSlot(self, principal)

    def _give_back(self, principal: str | None) -> None:
        self.active -= 1
        RUN_SLOTS.dec()
        left = self.held[principal] - 1
        if left:
            self.held[principal] = left
        else:
            del self.held[principal]
        self._changed.unpark_all()

    def release_when_done(self, slot: RunSlot, stream: DetachedRun) -> None:
        """Give back a detached run's slot once the run ends."""
        self._detached.add(stream)
        self.nursery.start_soon(self._wait_detached, slot, stream)

    def cancel_detached(self) -> None:
        """Cancel every detached run (shutdown, after its grace); each still ends with its terminal event."""
        for stream in self._detached:
            stream.cancel()

    async def _wait_detached(self, slot: RunSlot, stream: DetachedRun) -> None:
        try:
            await stream.wait_done()
        finally:
            self._detached.discard(stream)
            slot.release()

    async def wait_idle(self) -> None:
        """Return once no run is in flight."""
        while self.active:
            await self._changed.park()
