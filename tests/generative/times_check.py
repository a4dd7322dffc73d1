"""Recorded times never run ahead of the clock.

Every time the engine writes as something that happened (a step's start and end, a signal's
delivery, the ``now`` of a store call) is checked, as the call is made, against the clock of the
database (the FakeClock, moved by its offset on PostgreSQL). Times that are deadlines by
contract are not: a receive still WAITING records its timeout as ``ended_at``, a sleep records
its wake-up time as ``ended_at`` when it begins, and leases and due times lie ahead.

Completions are recorded strictly increasing, a microsecond apart when the clock has not moved
(``Execution.completion_time``): ``TOLERANCE`` allows for those.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sagaway.states import StepKind, StepStatus
from sagaway.store.records import StepRecord

TOLERANCE = 1e-3
"""Seconds a recorded time may lie ahead of the clock (completions a microsecond apart)."""


def ahead(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], now: float) -> list[str]:
    """What the store call ``name`` records as having happened after ``now``."""
    out = []
    for step in _steps((*args, *kwargs.values())):
        for field in ("started_at", "ended_at"):
            value = getattr(step, field)
            if value is None or value <= now + TOLERANCE:
                continue
            if field == "ended_at" and _deadline(step):
                continue
            out.append(
                f"{name} recorded {step.kind.value} {step.name!r} (call {step.call_id}, "
                f"{step.status.value}) {field} {value - now:.6f}s ahead of the clock"
            )
    written = kwargs.get("now")
    if isinstance(written, (int, float)) and written > now + TOLERANCE:
        out.append(f"{name} wrote now={written} {written - now:.6f}s ahead of the clock")
    return out


def _deadline(step: StepRecord) -> bool:
    """Its ``ended_at`` is a deadline: a wait's timeout, a sleep's wake-up time."""
    if step.status is StepStatus.WAITING:
        return True
    return step.kind is StepKind.SLEEP and step.status is StepStatus.COMPLETED


def _steps(values: tuple[Any, ...]) -> Iterator[StepRecord]:
    for value in values:
        if isinstance(value, StepRecord):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from (v for v in value if isinstance(v, StepRecord))
