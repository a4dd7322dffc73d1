"""Replaying exported histories against new workflow code in a unit test.

Export the history of an execution that matters (``sagaway show KEY --export > h.json``, or
``await handle.export_history()``), keep it with the tests, and check every code change
against it, as a deploy would meet it::

    async def test_new_code_replays_production_histories() -> None:
        await assert_replays(app.manager, *Path("tests/histories").glob("*.json"))

No database is needed: a closed Manager is opened on an in-memory SQLite database for the
check (an open one is used as it is). Nothing runs: activities are not called.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import sagaway as sw

History = str | os.PathLike[str] | dict[str, Any]
"""A history document, or the path of a JSON file holding one."""


async def replay_history(manager: sw.Manager, history: History) -> sw.ReplayReport:
    """Replay one exported history against the code registered in ``manager``."""
    document = _load(history)
    if manager.state is not sw.ManagerState.CLOSED:
        return await manager.replay_history(document)
    url, manager.url = manager.url, "sqlite:///:memory:"
    try:
        async with manager.connect():
            return await manager.replay_history(document)
    finally:
        manager.url = url


async def assert_replays(manager: sw.Manager, *histories: History) -> None:
    """Fail (AssertionError, with where and why) unless every history replays."""
    for history in histories:
        report = await replay_history(manager, history)
        if report.verdict != "ok":
            where = history if not isinstance(history, dict) else f"history of {report.key}"
            raise AssertionError(f"{where}: {report.message}")


def _load(history: History) -> Any:
    if isinstance(history, dict):
        return history
    path = Path(history)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the history {path}: {exc}") from None
