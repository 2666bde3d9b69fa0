"""Answering what a tool asks during ``yao-actors call``: on the terminal as ``yao-actors chat`` asks, or with the
form's defaults (``--accept-defaults``), and said on standard error when nobody can answer.

A server may ask the user during a call (``elicitation/create``, or a 2026-07-28 input round): a form, or a URL to
open. :func:`terminal_input` asks the person at the terminal the questions ``chat`` asks (the same helper), field
by field; without a terminal it declines and says so. :func:`default_input` accepts every form at once with what
its schema gives as defaults (SEP-1034), and declines a URL (nobody would open it). Either way an accepted form's
omitted fields that have a ``default`` are filled in before the answer is sent
(:func:`~yao_actors.tools.question_schemas.fill_defaults`, as for every answer sent to a server).
"""

from __future__ import annotations

import sys

from yao_actors.cli.terminal_questions import Ask, NoAnswer, ask_terminal, decide
from yao_actors.tools.input_requests import InputAnswer, InputHandler, InputRequest
from yao_actors.tools.question_schemas import fill_defaults


def call_input(*, accept_defaults: bool) -> InputHandler:
    """How ``call`` answers: with the defaults (``--accept-defaults``), else on the terminal, else (none) not."""
    if accept_defaults:
        return default_input()
    return terminal_input() if sys.stdin.isatty() else no_input()


def terminal_input(ask: Ask = ask_terminal) -> InputHandler:
    """Ask the person at the terminal (``ask``: as ``chat`` does), field by field."""

    async def answer(request: InputRequest) -> InputAnswer:
        interrupt = {
            "id": request.elicitation_id or request.tool,
            "reason": "url_required" if request.kind == "url" else "input_required",
            "message": f"{_who(request)} asks: {request.message}",
            "url": request.url,
            "responseSchema": dict(request.schema or {}),
        }
        try:
            payload = (await decide(interrupt, ask, sys.stderr))["payload"]
        except NoAnswer:  # the terminal's input ended
            return InputAnswer("decline")
        if payload["action"] != "accept" or request.kind == "url":
            return InputAnswer(payload["action"])
        return InputAnswer("accept", fill_defaults(payload.get("content") or {}, request.schema))

    return answer


def default_input() -> InputHandler:
    """Accept every form with its defaults, asking nobody; decline a URL to open."""

    async def answer(request: InputRequest) -> InputAnswer:
        if request.kind == "url":
            _say(f"{_who(request)} asks to open {request.url}; declined: --accept-defaults opens nothing")
            return InputAnswer("decline")
        _say(f"{_who(request)} asks: {request.message!r}; accepted with the form's defaults")
        return InputAnswer("accept", fill_defaults({}, request.schema))

    return answer


def no_input() -> InputHandler:
    """Decline every question, saying on standard error what was asked and why it was declined."""

    async def answer(request: InputRequest) -> InputAnswer:
        _say(f"{_who(request)} asks: {request.message!r}; declined: no terminal to ask on (--accept-defaults "
             "accepts a form with its defaults)")  # fmt: skip
        return InputAnswer("decline")

    return answer


def _who(request: InputRequest) -> str:
    return f"tool {request.tool!r} of server {request.server!r}"


def _say(text: str) -> None:
    print(f"yao-actors: {text}", file=sys.stderr)
