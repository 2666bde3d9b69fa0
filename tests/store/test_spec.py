"""The ``store`` configuration section and the default SQLite path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from yao_actors.errors import ConfigError
from yao_actors.store import (
    DEFAULT_EVENT_TTL,
    MemoryStore,
    StoreSpec,
    default_sqlite_path,
    open_store,
    parse_store_spec,
)
from yao_actors.store.spec import alone, check_shared, default_store_name, service_store


def test_each_store_type_parses() -> None:
    assert parse_store_spec({"type": "memory"}) == StoreSpec("memory")
    assert parse_store_spec({"type": "sqlite", "path": "/tmp/c.sqlite3", "event_ttl": 60}) == StoreSpec(
        "sqlite", path="/tmp/c.sqlite3", event_ttl=60.0
    )
    assert parse_store_spec({"type": "redis", "url": "redis://127.0.0.1:6379/0", "prefix": "y:"}) == StoreSpec(
        "redis", url="redis://127.0.0.1:6379/0", prefix="y:", event_ttl=DEFAULT_EVENT_TTL
    )


@pytest.mark.parametrize(
    ("data", "problems"),
    [
        ([], ["store: expected an object, got list"]),
        ({"type": "disk"}, ["store.type: must be one of 'memory', 'sqlite', 'redis', got 'disk'"]),
        ({"type": "sqlite"}, ["store.path: required for a sqlite store"]),
        (
            {"type": "redis", "url": "http://x", "path": "p", "event_ttl": 0},
            [
                "store.path: unknown key for a redis store (allowed: type, url, prefix, event_ttl, lease_ttl, lease_wait, secret_key)",
                "store.url: expected a redis:// or rediss:// URL, got 'http://x'",
                "store.event_ttl: expected a number of seconds > 0, got 0",
            ],
        ),
        ({"type": "redis", "url": "redis://h", "prefix": ""}, ["store.prefix: expected a non-empty string, got ''"]),
        ({"type": "sqlite", "path": "p", "exclusive": "yes"}, ["store.exclusive: expected true or false, got 'yes'"]),
        (
            {"type": "redis", "url": "redis://h", "exclusive": True},
            [
                "store.exclusive: unknown key for a redis store (allowed: type, url, prefix, event_ttl, lease_ttl, lease_wait, secret_key)"
            ],
        ),
    ],
)
def test_a_bad_section_names_each_problem_by_key_path(data: object, problems: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_store_spec(data)
    assert list(caught.value.problems) == problems


def test_key_path_is_the_callers() -> None:
    with pytest.raises(ConfigError, match=r"config\.store\.path: required"):
        parse_store_spec({"type": "sqlite"}, "config.store")


def test_default_sqlite_path_follows_xdg_state_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    state = default_sqlite_path({"XDG_STATE_HOME": "/srv/state"})
    assert state == Path("/srv/state/yao-actors/conversations.sqlite3")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_sqlite_path({}) == tmp_path / ".local/state/yao-actors/conversations.sqlite3"
    assert StoreSpec.sqlite().path is not None
    named = default_sqlite_path({"XDG_STATE_HOME": "/srv/state"}, name="port-8765")
    assert named == Path("/srv/state/yao-actors/conversations-port-8765.sqlite3")


def test_each_serve_gets_a_default_file_of_its_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 34, item 10: named after the config file (where it is, too) or, with no config, the port."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    names = {
        default_store_name("a/config.json", 8765),
        default_store_name("b/config.json", 8765),
        default_store_name("a/other config.json", 8765),
        default_store_name(None, 8765),
        default_store_name(None, 8766),
    }
    assert len(names) == 5
    assert default_store_name("a/config.json", 1) == default_store_name(str(tmp_path / "a" / "config.json"), 2)
    assert default_store_name(None, 8765) == "port-8765"
    assert re.fullmatch(r"other-config-[0-9a-f]{8}", default_store_name("a/other config.json", 1))
    store = service_store(None, None, name=default_store_name("a/config.json", 1))
    assert store.path == str(
        tmp_path / "state" / "yao-actors" / f"conversations-{default_store_name('a/config.json', 1)}.sqlite3"
    )
    assert service_store(None, "memory", name="x") == StoreSpec("memory")
    configured = StoreSpec.sqlite(tmp_path / "mine.sqlite3")
    assert service_store(configured, None, name="x") == configured


async def test_memory_is_what_a_memory_section_opens() -> None:
    async with open_store(parse_store_spec({"type": "memory", "event_ttl": 5})) as store:
        assert isinstance(store, MemoryStore)
        assert store.event_ttl == 5.0


def test_exclusive_is_said_or_left_to_the_process() -> None:
    said = parse_store_spec({"type": "sqlite", "path": "/tmp/c.sqlite3", "exclusive": False})
    unsaid = parse_store_spec({"type": "sqlite", "path": "/tmp/c.sqlite3"})
    assert (said.exclusive, unsaid.exclusive) == (False, None)
    assert alone(unsaid).exclusive is True  # a lone `yao-actors serve`
    assert alone(said) == said
    assert alone(StoreSpec("memory")) == StoreSpec("memory")
    check_shared(unsaid, 4)
    check_shared(said, 4)
    check_shared(alone(unsaid), 1)
    with pytest.raises(ConfigError, match=r"store\.exclusive: true keeps the SQLite file to one process, so 2 workers"):
        check_shared(alone(unsaid), 2)
