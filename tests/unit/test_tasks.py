"""``cancel_and_wait``: a lost cancel is asked again; the caller's own cancel is kept."""

from __future__ import annotations

import asyncio

import pytest

from sagaway._tasks import cancel_and_wait


async def test_a_task_that_lost_a_cancel_is_cancelled_again() -> None:
    """As when ``asyncio.wait_for`` drops a cancel arriving with its result: the task goes on
    to its next round; stopping it must not wait for that round."""
    rounds: list[str] = []
    started = asyncio.Event()

    async def loop() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            rounds.append("lost")  # swallowed, as the race does
        await asyncio.sleep(3600)  # the next round's wait

    task = asyncio.ensure_future(loop())
    await started.wait()
    stopper = asyncio.ensure_future(cancel_and_wait(task, again_after=0.01))
    done, _ = await asyncio.wait({stopper}, timeout=5)
    assert done, "cancel_and_wait waited for a task whose cancel was lost"
    assert task.cancelled() and rounds == ["lost"]


async def test_the_callers_cancel_is_not_swallowed() -> None:
    stopping = asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            stopping.set()
            await asyncio.sleep(3600)  # a cleanup that takes long

    task = asyncio.ensure_future(slow_to_stop())
    await asyncio.sleep(0)
    stopper = asyncio.ensure_future(cancel_and_wait(task, again_after=3600))
    await stopping.wait()
    stopper.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopper
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_an_error_the_task_ended_with_is_raised() -> None:
    async def broken() -> None:
        raise RuntimeError("boom")

    task = asyncio.ensure_future(broken())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="boom"):
        await cancel_and_wait(task)
    await cancel_and_wait(None)
