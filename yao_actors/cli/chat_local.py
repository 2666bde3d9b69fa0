"""``yao-actors chat --config FILE`` / ``--model ID``: chat with a service of its own, in this process, instead of
one running elsewhere — the quickest way to try servers, e.g. offline with the ``direct`` model::

    yao-actors chat --config mine.json --model direct "call time.get_current_time timezone=UTC"

The configuration (the embedded demo without ``--config``) is served with its own limits on a free loopback port with
a token of this process only, its threads in memory (gone at exit); ``--model`` makes every assistant use that model (a built-in
one such as ``direct``, ``test`` or ``demo``, or one of the file's ``models``). Then the question is asked, or the
conversation held, exactly as against a running service (:mod:`yao_actors.cli.chat`, :mod:`yao_actors.cli.chat_repl`),
and every server is stopped when it ends.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from collections.abc import Awaitable, Callable
from functools import partial

import attrs

from yao_actors.cli.problems import report_config_error
from yao_actors.cli.serving import import_from_the_current_directory, run_or_report
from yao_actors.config import Config, default_config, load_config
from yao_actors.errors import ConfigError, NotReady
from yao_actors.runtime import open_runtime
from yao_actors.service.listening import open_service
from yao_actors.specs import StoreSpec

#: Seconds the servers get to be ready before the first message (a server not ready by then is said, and its
#: tools come once it is).
READY_TIMEOUT = 30.0

Converse = Callable[[str, str], Awaitable[int]]
"""The conversation, given the service's URL and token; its exit code."""


def local_config(path: str | None, model: str | None) -> Config:
    """The configuration to serve here: ``path`` (else the embedded demo), every assistant on ``model`` if given,
    threads in memory. :class:`~yao_actors.errors.ConfigError` as ``serve`` would say it."""
    import_from_the_current_directory()
    config = load_config(path) if path else default_config()
    if model is not None:
        assistants = {key: attrs.evolve(assistant, model=model) for key, assistant in config.assistants.items()}
        config = attrs.evolve(config, assistants=assistants)
    return attrs.evolve(config, store=StoreSpec("memory"))


def run_locally(args: argparse.Namespace, converse: Converse) -> int:
    """Serve ``args.config`` (with ``args.model``) here and hold ``converse`` against it; the exit code (2 when
    the configuration or the service could not start, said in one line each)."""
    try:
        config = local_config(args.config, args.model)
    except ConfigError as error:
        report_config_error(error)
        return 2
    return run_or_report(partial(_serve_and_converse, config, converse))


async def _serve_and_converse(config: Config, converse: Converse) -> int:
    token = secrets.token_urlsafe(24)  # of this process only: no other local program joins the conversation
    spec = attrs.evolve(config.service, host="127.0.0.1", port=0, token=token, tokens={})
    async with open_runtime(config) as runtime, open_service(runtime, spec) as service:
        try:
            await runtime.wait_ready(timeout=READY_TIMEOUT)
        except NotReady as not_ready:
            print(f"yao-actors chat: {not_ready}", file=sys.stderr)
        return await converse(service.url, token)
