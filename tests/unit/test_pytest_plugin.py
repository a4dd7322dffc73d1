"""The fixtures Sagaway ships for its users' tests."""

from __future__ import annotations

import sagaway as sw
from sagaway.testing import FakeClock


async def test_fixtures_skip_a_three_day_wait(
    sagaway_manager: sw.Manager, sagaway_clock: FakeClock
) -> None:
    @sagaway_manager.register_workflow
    async def remind() -> str:
        await sagaway_manager.sleep(3 * 86400)
        return "done"

    start = sagaway_clock.now()
    async with sagaway_manager:
        handle = await sagaway_manager.workflow(remind).execute()
        assert await sagaway_clock.run_until(handle.result()) == "done"
    assert sagaway_clock.now() - start >= 3 * 86400
    assert sagaway_manager.url.startswith("sqlite:///")
