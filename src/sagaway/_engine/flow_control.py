"""Checks of the flow-control options of a start: a debounced start (``debounce_key``,
``debounce``, ``debounce_max_wait``) and a start in a per-key line (``ordering_key``).

What they do is in the store (the claim's order, the burst a start folds into); what a start
may ask for is decided here, once, for every entry point (``new_executions.build``).
"""

from __future__ import annotations

import dataclasses
import math

from sagaway._engine.text_checks import check_key
from sagaway.states import OnConflict


@dataclasses.dataclass(frozen=True, slots=True)
class FlowOptions:
    """A start's per-key order and debounce (``execute(ordering_key=, debounce_key=, ...)``)."""

    ordering_key: str | None = None
    debounce_key: str | None = None
    debounce: float | None = None
    debounce_max_wait: float | None = None

    @property
    def queued(self) -> bool:
        """Created PENDING, for a claim to start (never leased by the starting process)."""
        return self.ordering_key is not None or self.debounce_key is not None


def _seconds(value: float | None, name: str, *, zero: bool) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        least = "zero or more" if zero else "more than zero"
        raise ValueError(f"{name} must be a finite number of seconds, {least}, not {value!r}")


def check_debounce(key: str | None, debounce: float | None, max_wait: float | None) -> None:
    """A debounced start names its burst (``key``) and its quiet period (``debounce``);
    ``max_wait``, if given, is at least the period."""
    if key is None:
        if debounce is not None or max_wait is not None:
            raise ValueError(
                "debounce and debounce_max_wait need a debounce_key: the starts that share "
                "the key are the ones that collapse into one run"
            )
        return
    check_key(key, "debounce_key")
    if debounce is None:
        raise ValueError(
            "debounce_key needs debounce=<seconds>: how long no new start of the key must "
            "come before the run starts"
        )
    _seconds(debounce, "debounce", zero=True)
    _seconds(max_wait, "debounce_max_wait", zero=False)
    if max_wait is not None and max_wait < debounce:
        raise ValueError(
            f"debounce_max_wait ({max_wait!r}) must be at least debounce ({debounce!r}): "
            "a burst always waits one quiet period"
        )


def check_debounce_conflict(flow: FlowOptions, on_conflict: OnConflict) -> None:
    """A debounced start joins the open burst of its key: only ``OnConflict.ATTACH`` means
    that (``FAIL`` would refuse every start after the first, ``TERMINATE_EXISTING`` would end
    the run the burst collects its starts into)."""
    if flow.debounce_key is not None and on_conflict is not OnConflict.ATTACH:
        raise ValueError(
            f"a debounced start joins the run of its burst: on_conflict must be ATTACH, "
            f"not {on_conflict.name}"
        )


def check_ordering(key: str | None) -> None:
    """An ordering key is a key like a workflow's."""
    if key is not None:
        check_key(key, "ordering_key")
