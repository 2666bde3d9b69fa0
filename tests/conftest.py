"""Every test's own state directory: the service's default SQLite store (under ``$XDG_STATE_HOME``) never lands in
the real home, and no two tests share one, also in the service processes they start (they inherit the variable)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path_factory.mktemp("xdg-state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state
