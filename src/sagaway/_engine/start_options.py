"""The options of a start, as records its entry points take with ``**options: Unpack[...]``
(``execute()``, ``start_by_name()``, ``SyncClient.start()``), so that each is written once:
``StartPlacing`` (where a start stands among the waiting ones) and ``NamedStart`` (a start
by name)."""

from __future__ import annotations

from typing import TypedDict

from sagaway._engine.flow_control import UNKEYED, FlowOptions
from sagaway.states import OnConflict

Asked = tuple[int | None, str | None, float | None]
"""A start's priority, fairness key and fairness weight as given (None: not given)."""
NOT_ASKED: Asked = (None, None, None)


class StartPlacing(TypedDict, total=False):
    """Where a start stands among the waiting ones: the flow-control options every start of a
    workflow takes (``execute()``, ``start_by_name()``, ``SyncClient.start()`` ...), each
    None (the default) when not given; docs/limits.md.

    ``ordering_key``: the executions started with this key run one at a time, in the order
    started, cluster-wide. ``debounce_key`` with ``debounce`` (seconds): start-or-postpone,
    the run starts once no start of the key came for ``debounce`` seconds (at most
    ``debounce_max_wait`` after the burst's first start). ``priority`` 1 (lowest) .. 5
    (highest), default 3; ``fairness_key`` (a tenant) and its ``fairness_weight`` (default
    1): the order of waiting starts, higher first, tenants by weight."""

    ordering_key: str | None
    debounce_key: str | None
    debounce: float | None
    debounce_max_wait: float | None
    priority: int | None
    fairness_key: str | None
    fairness_weight: float | None


PLACING = StartPlacing.__optional_keys__
"""The names of ``StartPlacing``'s options."""


def split_placing(placing: StartPlacing, where: str) -> tuple[FlowOptions, Asked]:
    """``placing`` as the engine takes it: its per-key order and debounce, and what it asks
    of priority and fairness (checked by ``flow.of_start``); ``TypeError`` for a name that
    is none of the options (as a keyword argument ``where`` does not take)."""
    if not placing:  # most starts: nothing to read
        return UNKEYED, NOT_ASKED
    unknown = sorted(set(placing) - PLACING)
    if unknown:
        raise TypeError(f"{where} got an unexpected keyword argument {unknown[0]!r}")
    keyed = FlowOptions(
        placing.get("ordering_key"),
        placing.get("debounce_key"),
        placing.get("debounce"),
        placing.get("debounce_max_wait"),
    )
    asked = (placing.get("priority"), placing.get("fairness_key"), placing.get("fairness_weight"))
    return keyed, asked


class NamedStart(StartPlacing, total=False):
    """``start_by_name``'s options: ``idempotency_key`` (None: a new random key),
    ``task_queue`` (default ``"default"``: the workers that run it), ``on_conflict`` (default
    ``OnConflict.ATTACH``), ``deadline`` (seconds from its start; ``timeout`` is its
    deprecated old name), ``reason`` (an operator's start, recorded in the audit trail), and
    ``StartPlacing``'s."""

    idempotency_key: str | None
    task_queue: str
    on_conflict: OnConflict
    deadline: float | None
    timeout: float | None
    reason: str | None
