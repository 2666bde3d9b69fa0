"""Which call of a connection asked the user a question: never a guess.

A handshake-era server asks (``elicitation/create``) while one of its calls runs, and over streamable HTTP the
request that carries the question says which call it belongs to. Over stdio (and the older SSE transport) nothing
does: the question could come from any call in flight. A question that reaches the wrong call would show one
user's question to another and give the answer to the wrong call, so :class:`Askers` ties a question that the
transport leaves untied only by what is certain:

- a call whose own question is already with the user (held for an answer, or with the input handler) is blocked
  in the server until it has that answer: it cannot be the asker, so the calls that can are the *active* ones
  (running, and not waiting for an answer);
- a question that arrives while exactly one call is active is that call's;
- one that arrives while several are active is held until all but one have left the running: a call the server
  answered cannot have asked it (its tool finished), nor can one that has since asked its own question. A call
  abandoned here (its deadline, its caller gone) may have asked it: then it is refused. When every call that could
  have asked it has an untied question too, waiting cannot tell them apart: the newest is refused (its call fails
  with the reason), and the others are told apart as that call ends.

Once a server has asked a question its transport left untied, the connection runs its calls **one at a time**
(:attr:`Askers.one_at_a_time`): a call starts only when no other is active, and a call whose question was answered
waits for its turn again before the answer goes back to the server. A call waiting for the user's answer never
holds the others up. Then every question arrives while one call is active, and is tied to it at once.
"""

from __future__ import annotations

import attrs
import trio

from yao_actors.tools.call_request import CallRequest


@attrs.define(eq=False)
class _Untied:
    """A question that arrived without saying which call asked: the calls active then, and whether one of them
    was abandoned since (it may have been the asker)."""

    candidates: set[CallRequest]
    abandoned: bool = False


@attrs.define(eq=False)
class Askers:
    """The calls of one connection, as far as who asked a question goes (module docstring)."""

    running: set[CallRequest] = attrs.field(factory=set)
    waiting: set[CallRequest] = attrs.field(factory=set)
    """Calls whose question is with the user (they cannot ask another before its answer)."""
    one_at_a_time: bool = False
    held: list[_Untied] = attrs.field(factory=list)
    _changed: trio.Event = attrs.field(factory=trio.Event)
    _waiters: int = 0
    """Tasks in :meth:`_wait` now: counted here, since asking the event (``statistics()``) builds a value."""

    def active(self) -> set[CallRequest]:
        """The calls that can ask now: running, and not waiting for an answer."""
        return self.running - self.waiting

    async def enter(self, request: CallRequest) -> None:
        """``request`` starts (after its turn, when calls run one at a time)."""
        await self._take_turn(request)
        self.running.add(request)
        self._change()

    def leave(self, request: CallRequest, *, answered: bool) -> None:
        """``request`` is over: ``answered`` by the server, or abandoned here (then it may have asked a held
        question, which can no longer be tied)."""
        self.running.discard(request)
        self.waiting.discard(request)
        if not answered:
            for question in self.held:
                if request in question.candidates:
                    question.abandoned = True
        self._change()

    def ask_user(self, request: CallRequest) -> None:
        """``request``'s question is with the user now."""
        self.waiting.add(request)
        self._change()

    async def resume(self, request: CallRequest) -> None:
        """``request`` has its answer (or its question was withdrawn): it is active again, after its turn when
        calls run one at a time. Cancelled meanwhile, it is active at once: a call counted as one that may ask is
        never tied to a question it did not ask, one wrongly counted as waiting could be."""
        try:
            await self._take_turn(request)
        finally:
            self.waiting.discard(request)
            self._change()

    async def asker(self) -> CallRequest | str:
        """The call that asked a question the transport did not tie to one (module docstring), or why it cannot
        be told; waits while that may still become clear."""
        question = _Untied(self.active())
        self.held.append(question)
        try:
            while True:
                live = question.candidates & self.active()
                if question.abandoned:
                    return "the call that asked for input may be one that has ended"
                if len(live) == 1:
                    return live.pop()
                if not live:
                    return "no call in flight can have asked for input"
                if self._stuck():
                    return f"cannot tell which of {len(live)} calls in flight asked for input"
                await self._wait()
        finally:
            self.held.remove(question)

    def _stuck(self) -> bool:
        """Whether each call that could have asked a held question has one of them: none can end before its
        answer, so waiting tells nothing more."""
        could = set().union(*(question.candidates for question in self.held)) & self.active()
        return len(self.held) >= len(could)

    async def _take_turn(self, request: CallRequest) -> None:
        while self.one_at_a_time and self.active() - {request}:
            await self._wait()

    async def _wait(self) -> None:
        """Until the calls change."""
        self._waiters += 1
        try:
            await self._changed.wait()
        finally:
            self._waiters -= 1

    def _change(self) -> None:
        """Wake whoever waits for the calls to change (a new event only when someone waited: calls start and end
        often, and rarely does anyone wait)."""
        if self._waiters:
            self._changed.set()
            self._changed = trio.Event()


__all__ = ["Askers"]
