"""How a command says its configuration is wrong: one line on standard error per problem, each naming the file it
is in when it is in one (``check`` prints the same lines as its report, on standard output)."""

from __future__ import annotations

import sys

from yao_actors.errors import ConfigError

#: The exit code of bad arguments and bad configuration input.
CONFIG_EXIT = 2


def report_config_error(error: ConfigError) -> int:
    """Print ``error``'s problems, one line each; return :data:`CONFIG_EXIT`."""
    where = f"{error.source}: " if error.source else ""
    for problem in error.problems:
        print(f"yao-actors: {where}{problem}", file=sys.stderr)
    return CONFIG_EXIT
