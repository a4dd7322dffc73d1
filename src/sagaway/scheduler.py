"""The old home of ``Scheduler``, now ``sagaway.schedules.scheduler`` (kept so imports work)."""

from __future__ import annotations

from sagaway.schedules.scheduler import Scheduler

__all__ = ["Scheduler"]
