"""Processes opening a new SQLite store at once (``serve --workers N`` on a first start) all open it.

SQLite refuses the switch to WAL at once ("database is locked", without its busy handler) to all but one of the
processes racing to make the new file WAL; the store tries again within its busy timeout. Without that, two
processes let go together lost the race about half the time.
"""

from __future__ import annotations

import multiprocessing
import traceback
from pathlib import Path
from typing import Any

from yao_actors.store.sqlite.schema import connect

ROUNDS = 12


def _open(path: str, ready: Any, results: Any) -> None:
    ready.wait()  # every process calls connect at the same moment
    try:
        connect(path, busy_timeout=5.0).close()
        results.put("ok")
    except Exception:
        results.put(traceback.format_exc())


def test_processes_opening_a_new_store_together_all_open_it(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")  # no re-import per process: they start within a millisecond
    failures = []
    for round_ in range(ROUNDS):
        path = str(tmp_path / f"round-{round_}" / "conversations.sqlite3")
        ready, results = context.Barrier(3), context.Queue()
        processes = [context.Process(target=_open, args=(path, ready, results)) for _ in range(3)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(30)
        failures += [said for said in (results.get(timeout=5) for _ in processes) if said != "ok"]
    assert failures == []
