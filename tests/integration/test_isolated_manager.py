"""``sagaway.testing.isolated_manager``: an application's module-level Manager runs its own
workflows on a test's database and FakeClock, with nothing monkeypatched or registered again,
and gets its settings back afterwards."""

from __future__ import annotations

import pytest

import sagaway as sw
from sagaway.testing import FakeClock, isolated_manager
from tests.integration import isolated_app


def _settings(m: sw.Manager) -> tuple[object, ...]:
    return (m.url, m.clock, m.options, m.retention, m.state, m.registry)


async def test_the_application_manager_runs_on_the_test_database(db_url: str) -> None:
    before = _settings(isolated_app.manager)
    clock = FakeClock()
    for run in (1, 2):  # isolated again by the next test, on another database
        with isolated_manager(isolated_app.manager, db_url, clock) as manager:
            assert manager is isolated_app.manager and manager.url == db_url
            assert manager.clock is clock and manager.retention is None
            async with manager:
                handle = await manager.workflow(isolated_app.remind, 3).execute(
                    idempotency_key=f"r-{run}"
                )
                start = clock.now()
                assert await clock.run_until(handle.result()) == "REMINDED AFTER 3 DAYS"
                assert clock.now() - start >= 3 * 86400  # three days, skipped
        assert _settings(isolated_app.manager) == before
    async with sw.Manager(db_url).connect(create=False) as reader:
        for key in ("r-1", "r-2"):
            assert await reader.get_workflow(key).status() is sw.WorkflowStatus.COMPLETED


async def test_an_open_manager_is_refused_and_settings_come_back_after_an_error(
    sagaway_db_url: str,
) -> None:
    before = _settings(isolated_app.manager)
    with (
        pytest.raises(RuntimeError, match="boom"),
        isolated_manager(isolated_app.manager, sagaway_db_url),
    ):
        assert isolated_app.manager.url == sagaway_db_url
        raise RuntimeError("boom")
    assert _settings(isolated_app.manager) == before
    with isolated_manager(isolated_app.manager, sagaway_db_url) as manager:
        async with manager:
            refused = pytest.raises(sw.ManagerStateError, match="needs a closed Manager")
            with refused, isolated_manager(manager, sagaway_db_url):
                pass
    assert _settings(isolated_app.manager) == before
