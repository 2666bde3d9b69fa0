"""The Redis store's keys (issue 29, defect 1): no id names another key, ids without ``:`` or ``%`` keep the keys
stores written before escaping have, and the scripts' escape is the same as Python's (against a real Redis)."""

from __future__ import annotations

from collections.abc import Callable

import coredis
import pytest
import trio
from hypothesis import example, given
from hypothesis import strategies as st

from yao_actors.store.redis.keys import ESCAPE_LUA, RedisKeys, escape, unescape
from yao_actors.testing.redis_server import RedisServer

PREFIX = "yao:"
KEYS = RedisKeys(PREFIX)

#: Every kind of key the store and its leases build, by name: an id (or principal) to its key.
KINDS: dict[str, Callable[[str], str]] = {
    "thread": KEYS.thread,
    "messages": KEYS.messages,
    "thread_runs": KEYS.thread_runs,
    "lease": KEYS.lease,
    "run": KEYS.run,
    "events": KEYS.events,
    "owner_index": KEYS.owner_index,
    "threads": lambda _: KEYS.threads,
    "running": lambda _: KEYS.running,
    "no_owner_index": lambda _: KEYS.owner_index(None),
}
FIXED = {"threads", "running", "no_owner_index"}
"""Kinds with one key and no id."""

#: Ids made of the pieces keys are made of: separators, escapes, kind words and suffixes, and other text.
PIECES = st.sampled_from(
    [":", "%", "%3A", "%25", "3A", "25", "messages", "runs", "lease", "events", "thread", "run", "threads",
     "owner", "=", "~", "running", "x", "é", "北京", ""]
)  # fmt: skip
IDS = st.one_of(st.lists(PIECES, max_size=8).map("".join), st.text(max_size=20))
PAIRS = st.tuples(st.sampled_from(sorted(KINDS)), IDS)


def normal(kind: str, identifier: str) -> tuple[str, str]:
    """A (kind, id) pair as it names a key: the id of a kind without one does not matter."""
    return (kind, "") if kind in FIXED else (kind, identifier)


@given(PAIRS, PAIRS)
@example(("thread", "x:messages"), ("messages", "x"))
@example(("thread", "x:runs"), ("thread_runs", "x"))
@example(("thread", "x:lease"), ("lease", "x"))
@example(("run", "r:events"), ("events", "r"))
@example(("thread", "x%3Amessages"), ("thread", "x:messages"))
@example(("owner_index", ""), ("no_owner_index", ""))
def test_no_two_distinct_kind_and_id_pairs_give_the_same_key(a: tuple[str, str], b: tuple[str, str]) -> None:
    if normal(*a) != normal(*b):
        assert KINDS[a[0]](a[1]) != KINDS[b[0]](b[1])


def kinds_of(key: str) -> set[tuple[str, str]]:
    """Every (kind, id) whose key ``key`` is, read back from it: a kind's keys are a head, the escaped id and a
    tail (found by building the key of a marker id), so the id is what lies between, unescaped, if building
    its key gives ``key`` again."""
    found = set()
    for kind, build in KINDS.items():
        if kind in FIXED:
            if build("") == key:
                found.add((kind, ""))
            continue
        head, _, tail = build(MARKER).partition(MARKER)
        if key.startswith(head) and key.endswith(tail) and len(key) >= len(head) + len(tail):
            identifier = unescape(key[len(head) : len(key) - len(tail)])
            if build(identifier) == key:
                found.add((kind, identifier))
    return found


MARKER = "\x00"
"""An id that is its own escape and in no kind's key words."""


@given(PAIRS)
@example(("thread", "x:messages"))
@example(("run", "r:events"))
@example(("lease", "a:b%3Ac"))
def test_no_id_gives_a_key_of_another_kind(pair: tuple[str, str]) -> None:
    kind, identifier = normal(*pair)
    key = KINDS[kind](identifier)
    assert kinds_of(key) == {(kind, identifier)}
    assert key.startswith(PREFIX)


@given(IDS)
def test_an_escaped_id_has_no_separator_and_is_unescaped_back(identifier: str) -> None:
    escaped = escape(identifier)
    assert ":" not in escaped
    assert unescape(escaped) == identifier


@given(st.text(alphabet=st.characters(blacklist_characters=":%"), max_size=30))
def test_ids_without_separator_or_escape_keep_the_keys_stores_had_before(identifier: str) -> None:
    assert escape(identifier) == identifier
    assert KEYS.thread(identifier) == f"yao:thread:{identifier}"
    assert KEYS.messages(identifier) == f"yao:thread:{identifier}:messages"
    assert KEYS.thread_runs(identifier) == f"yao:thread:{identifier}:runs"
    assert KEYS.lease(identifier) == f"yao:thread:{identifier}:lease"
    assert KEYS.run(identifier) == f"yao:run:{identifier}"
    assert KEYS.events(identifier) == f"yao:run:{identifier}:events"
    assert KEYS.owner_index(identifier) == f"yao:threads:owner:={identifier}"


def test_the_fixed_keys_are_those_stores_had_before() -> None:
    assert (KEYS.threads, KEYS.running, KEYS.owner_index(None)) == (
        "yao:threads",
        "yao:runs:running",
        "yao:threads:owner:~",
    )


TRICKY = ["x:messages", "r:events", "%", "%3A", "a:b%c::", "北京:天气%", ":", "", "100%:done", "%%::%%"]


@pytest.mark.parametrize("identifier", TRICKY)
def test_escape_is_undone_only_one_way(identifier: str) -> None:
    assert unescape(escape(identifier)) == identifier


async def test_the_scripts_escape_ids_as_python_does(redis_server: RedisServer) -> None:
    with trio.fail_after(20):
        async with coredis.Redis.from_url(redis_server.url, decode_responses=True) as client:
            for identifier in TRICKY:
                answer = await client.eval(ESCAPE_LUA + "return escape(ARGV[1])", keys=[], args=[identifier])
                assert answer == escape(identifier), identifier
