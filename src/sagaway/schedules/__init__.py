"""Schedules: workflows started at the ticks of a cron expression, once per tick.

One package, by responsibility:

- ``declared``: schedules declared with ``register_workflow(schedule=...)`` (``ScheduleSpec``),
  written into the database when a Manager that runs workers opens;
- ``calls``: the Manager's schedule calls (``manager.schedule``, pause, resume, trigger,
  delete, list), audited;
- ``scheduler``: the ``Scheduler`` every worker process runs, firing the due ticks;
- ``ticks``: the rules of a tick (which ticks a due schedule runs, their keys, the
  compare-and-set that starts them exactly once) and the definitions written to the store.

It sits above the engine (``_engine``) and below the Manager in the layers (pyproject.toml):
nothing in the engine or the stores calls into it.
"""

from __future__ import annotations

from sagaway.schedules.calls import ScheduleCalls
from sagaway.schedules.declared import ScheduleSpec, declare, put_declared
from sagaway.schedules.scheduler import Scheduler

__all__ = ["ScheduleCalls", "ScheduleSpec", "Scheduler", "declare", "put_declared"]
