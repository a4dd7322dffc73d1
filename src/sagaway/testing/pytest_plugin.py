"""pytest fixtures for code built on Sagaway (loaded through the pytest11 entry point).

@pytest.mark.asyncio
async def test_reminder(sagaway_manager, sagaway_clock):
    @sagaway_manager.register_workflow
    async def remind() -> str:
        await sagaway_manager.sleep(3 * 86400)
        return "done"

    async with sagaway_manager:
        handle = await sagaway_manager.workflow(remind).execute()
        assert await sagaway_clock.run_until(handle.result()) == "done"

To test an application's own module, whose workflows use its module-level Manager, isolate that
Manager instead: ``sagaway.testing.isolated_manager`` (docs/testing.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sagaway.manager import Manager
from sagaway.testing.clock import FakeClock
from sagaway.testing.manager import time_skipping_manager


@pytest.fixture
def sagaway_clock() -> FakeClock:
    """A FakeClock: time moves only with ``advance`` / ``run_until``."""
    return FakeClock()


@pytest.fixture
def sagaway_db_url(tmp_path: Path) -> str:
    """A fresh SQLite database in the test's temporary directory."""
    return f"sqlite:///{tmp_path}/sagaway-test.db"


@pytest.fixture
def sagaway_manager(sagaway_db_url: str, sagaway_clock: FakeClock) -> Manager:
    """A Manager on ``sagaway_db_url`` driven by ``sagaway_clock`` (not opened yet)."""
    return time_skipping_manager(sagaway_db_url, sagaway_clock)
