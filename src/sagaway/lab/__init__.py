"""The order lab on Sagaway: four services, one orchestrating workflow, and five experiments
that each show a mistake in the design of a saga and its remedy, run on a deterministic clock
(``sagaway demo lab``).

``await run_lab()`` runs every experiment on fresh SQLite databases and returns one
:class:`Result` per variant: final stock, order and workflow statuses, compensations run, and
the log, which is the same on every run.
"""

from __future__ import annotations

from sagaway.lab.clock import SimClock
from sagaway.lab.experiments import EXPERIMENTS, Experiment, Result, Variant, run_lab, run_variant
from sagaway.lab.saga import ORDER_SAGA, LabOrder
from sagaway.lab.services import ReleaseMode

__all__ = [
    "EXPERIMENTS",
    "ORDER_SAGA",
    "Experiment",
    "LabOrder",
    "ReleaseMode",
    "Result",
    "SimClock",
    "Variant",
    "run_lab",
    "run_variant",
]
