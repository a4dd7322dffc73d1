"""Checks of the flow-control options of a start: a debounced start (``debounce_key``,
``debounce``, ``debounce_max_wait``) and a start in a per-key line (``ordering_key``).

What they do is in the store (the claim's order, the burst a start folds into); what a start
may ask for is decided here, once, for every entry point (``new_executions.build``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from sagaway._engine.text_checks import check_key
from sagaway.states import OnConflict, WorkflowStatus
from sagaway.store.base import Store
from sagaway.store.records import ListQuery, WorkflowRecord

_LIVE = frozenset(s for s in WorkflowStatus if not s.ended)
MAX_LINE = 10_000
"""The most executions of a line ``place_in_line`` reads (a page, as any listing)."""


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


UNKEYED = FlowOptions()


def check_keyed(keyed: FlowOptions) -> None:
    """``ValueError`` for an ordering key or a debounce out of range (``check_ordering``,
    ``check_debounce``)."""
    check_ordering(keyed.ordering_key)
    check_debounce(keyed.debounce_key, keyed.debounce, keyed.debounce_max_wait)


"""A start given none of the per-key options (the default of every ``keyed=``)."""


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


def check_debounce_conflict(flow: FlowOptions | None, on_conflict: OnConflict) -> FlowOptions:
    """``flow`` (None: no options), checked: a debounced start joins the open burst of its
    key, and only ``OnConflict.ATTACH`` means that (``FAIL`` would refuse every start after
    the first, ``TERMINATE_EXISTING`` would end the run the burst collects its starts into)."""
    flow = flow or UNKEYED
    if flow.debounce_key is not None and on_conflict is not OnConflict.ATTACH:
        raise ValueError(
            f"a debounced start joins the run of its burst: on_conflict must be ATTACH, "
            f"not {on_conflict.name}"
        )
    return flow


def check_ordering(key: str | None) -> None:
    """An ordering key is a key like a workflow's."""
    if key is not None:
        check_key(key, "ordering_key")


@dataclasses.dataclass(frozen=True, slots=True)
class Place:
    """Where a live execution of an ordering key stands in its line."""

    ahead: int
    """How many of the key's live executions run or wait before it (0: it is the head)."""
    behind_key: str | None
    """The key of the one directly before it (None: it is the head)."""


async def place_in_line(store: Store, record: WorkflowRecord) -> Place | None:
    """``record``'s place in its ordering key's line; None when it has no ordering key or has
    ended (it is no longer in line)."""
    if record.ordering_key is None or record.ordering_seq is None or record.status.ended:
        return None
    query = ListQuery(limit=MAX_LINE, statuses=_LIVE, ordering_key=record.ordering_key)
    seq = record.ordering_seq
    ahead = sorted(
        (r.ordering_seq, r.key)
        for r in await store.list_page(query)
        if r.ordering_seq is not None and r.ordering_seq < seq
    )
    return Place(len(ahead), ahead[-1][1] if ahead else None)


def described_place(place: Place | None) -> dict[str, Any]:
    """The ``WorkflowDescription`` fields of a place in line."""
    if place is None:
        return {}
    return {"waits_behind": place.behind_key, "ahead_in_line": place.ahead}
