"""A workflow's deadline bounds its activities too: an attempt still running ``deadline_grace``
seconds after the deadline is cancelled inside its task, and its step recorded as cancelled
(FAILED, ``sagaway.Cancelled``), so the saga compensates what completed.

An async activity sees ``asyncio.CancelledError`` where it awaits; one that swallows it is
abandoned (its result, if it ever comes, is discarded). A sync activity's thread cannot be
stopped: it runs on to its end in the engine's thread pool, holding one of its threads, and
its result is discarded. Compensations are never cut (they run until they succeed), nor are
activities a workflow makes after it caught its cancellation.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from sagaway import errors
from sagaway._engine.clock_race import finish_within

if TYPE_CHECKING:
    from sagaway._engine.engine import Engine
    from sagaway._engine.execution import ExecutionBase
    from sagaway.registry import ActivityDef


class DeadlineCut(Exception):
    """An activity attempt was cancelled: the workflow's deadline and its grace passed."""


def cut_after(execution: ExecutionBase, defn: ActivityDef) -> float | None:
    """Seconds until an attempt of ``defn`` beginning now is cancelled (None: never)."""
    deadline = execution.record.deadline_at
    if deadline is None or execution.cancels.delivered:
        return None
    engine = execution.engine
    return max(deadline + engine.options.deadline_grace - engine.clock.now(), 0.0)


async def bounded(
    work: Awaitable[Any], timeout: float | None, cut: float, engine: Engine, name: str
) -> Any:
    """Await an attempt, bounded by its own ``timeout`` (``ActivityTimeout``) and by ``cut``,
    the workflow's deadline plus grace (``DeadlineCut``), whichever comes first."""
    limit = cut if timeout is None else min(cut, timeout)
    finished, result = await finish_within(work, limit, engine.clock)
    if finished:
        return result
    # cancelled inside the activity's task; a thread runs on (see the module)
    grace = engine.options.deadline_grace
    if timeout is not None and timeout < cut:
        raise errors.ActivityTimeout(f"activity {name!r} did not finish within {timeout}s")
    raise DeadlineCut(
        f"activity {name!r} was still running {grace:g}s after the deadline and was cancelled"
    )
