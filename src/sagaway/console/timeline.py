"""The step timeline of a workflow page: each step as a bar on the workflow's time axis.

Positions are percentages of the axis, which runs from the workflow's creation to its end (or
to now while it runs). The page draws them as SVG rectangles, whose ``x``/``width`` attributes
are allowed by the console's Content-Security-Policy (inline ``style`` attributes are not).
"""

from __future__ import annotations

import dataclasses
import time

import sagaway as sw

MIN_WIDTH = 0.4
"""Percent: a step that took no visible time still shows as a sliver."""


@dataclasses.dataclass(frozen=True, slots=True)
class Bar:
    """One step on the axis."""

    step: sw.StepDescription
    left: float
    """Percent of the axis from its start."""
    width: float
    """Percent of the axis."""
    open: bool
    """Still going (no end yet, or waiting): drawn up to now."""

    @property
    def compensation(self) -> bool:
        return self.step.kind is sw.StepKind.COMPENSATION


@dataclasses.dataclass(frozen=True, slots=True)
class Timeline:
    bars: list[Bar]
    span: float
    """Seconds the axis covers."""
    ticks: list[float]
    """Seconds from the start, evenly spread, for the axis labels."""


def _end_of(step: sw.StepDescription, now: float) -> tuple[float, bool]:
    """Where the step's bar ends, and whether it is still open. A waiting step's (or a
    sleep's) ``ended_at`` is a deadline, not an end: it is drawn up to now until it ends."""
    waiting = step.status is sw.StepStatus.WAITING
    if step.ended_at is None or waiting:
        return max(now, step.started_at), True
    if step.kind is sw.StepKind.SLEEP and step.ended_at > now:
        return now, True
    return step.ended_at, False


def build(d: sw.WorkflowDescription, now: float | None = None, ticks: int = 5) -> Timeline:
    """The bars of ``d``'s steps, in the order they were recorded."""
    now = time.time() if now is None else now
    start = d.created_at
    ends = [_end_of(s, now) for s in d.steps]
    stop = d.ended_at if d.ended_at is not None else now
    stop = max([stop, start, *(end for end, _ in ends)])
    span = max(stop - start, 1e-3)
    bars = []
    for step, (end, is_open) in zip(d.steps, ends, strict=True):
        left = min(max((step.started_at - start) / span * 100, 0.0), 100.0 - MIN_WIDTH)
        width = max((end - max(step.started_at, start)) / span * 100, MIN_WIDTH)
        bars.append(Bar(step, round(left, 3), round(min(width, 100.0 - left), 3), is_open))
    return Timeline(bars, span, [span * i / (ticks - 1) for i in range(ticks)])
