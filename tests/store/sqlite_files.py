"""SQLite store files as an older release of the store wrote them, for the tests of the store's upgrades."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

from yao_actors.store.sqlite.schema import MIGRATIONS

#: A statement, or a statement and its parameters.
Statement = str | tuple[str, tuple[Any, ...]]


def write_file_of_version(path: Path, version: int, *rows: Statement) -> None:
    """The store's file at ``path`` as the store of schema ``version`` wrote it, holding what ``rows`` put in."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        for statement in (s for migration in MIGRATIONS[:version] for s in migration):
            db.execute(statement)
        db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        db.execute("INSERT INTO schema_version VALUES (?)", (version,))
        for row in rows:
            db.execute(*((row,) if isinstance(row, str) else row))
        db.commit()
