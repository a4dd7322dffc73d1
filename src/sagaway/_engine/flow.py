"""Flow control of starts: a start's priority and its fairness key and weight, checked once.

A start given neither keeps the defaults (priority 3, no key, weight 1) and, in a process whose
worker serves it, may run there at once as before. A start given either is created PENDING, so
that only claims, which order due work by priority and fair pass, decide when it runs: across
processes and machines, the database holds the order. A child workflow takes its parent's
priority and fairness key and weight unless its own start gives them.
"""

from __future__ import annotations

import dataclasses

from sagaway._engine.text_checks import check_key
from sagaway.store._params import DEFAULT_PRIORITY, PRIORITIES, check_flow


@dataclasses.dataclass(frozen=True, slots=True)
class Flow:
    """The flow control options of one start (``execute(priority=, fairness_key=,
    fairness_weight=)``)."""

    priority: int = DEFAULT_PRIORITY
    """1 (lowest) .. 5 (highest)."""
    fairness_key: str = ""
    """The tenant the start is counted for; '': none."""
    fairness_weight: float = 1.0
    """The key's share of claims while starts wait, relative to other keys' weights."""

    @property
    def plain(self) -> bool:
        """Whether this start asks for nothing: it may run at once where it is started."""
        return self == PLAIN


PLAIN = Flow()


def of_start(
    priority: int | None,
    fairness_key: str | None,
    fairness_weight: float | None,
    *,
    inherited: Flow = PLAIN,
) -> Flow:
    """The flow of a start given these options (None: ``inherited``'s, a child's parent's);
    ``ValueError`` for a level, key or weight out of range."""
    if priority is None and fairness_key is None and fairness_weight is None:
        return inherited  # the common start: nothing to check again
    flow = Flow(
        priority=inherited.priority if priority is None else priority,
        fairness_key=inherited.fairness_key if fairness_key is None else fairness_key,
        fairness_weight=inherited.fairness_weight if fairness_weight is None else fairness_weight,
    )
    check_flow(flow.priority, flow.fairness_weight)
    if fairness_key is not None:
        check_key(fairness_key, "fairness_key")
    if fairness_weight is not None and not flow.fairness_key:
        raise ValueError("fairness_weight is the share of a fairness_key: give one")
    return dataclasses.replace(flow, fairness_weight=float(flow.fairness_weight))


def of_record(priority: int, fairness_key: str, fairness_weight: float) -> Flow:
    """The flow a stored execution was started with (what its children inherit)."""
    return Flow(priority, fairness_key, fairness_weight)


def check_level(priority: int | None, what: str) -> None:
    """``ValueError`` (naming ``what``) unless ``priority`` is None (not given) or a level: an
    activity call's (``execute_get(priority=)``, ``register_activity(priority=)``) or a
    registered workflow's default (``register_workflow(priority=)``)."""
    if priority is not None and (
        isinstance(priority, bool) or not isinstance(priority, int) or priority not in PRIORITIES
    ):
        raise ValueError(
            f"{what} must be an int from {PRIORITIES[0]} (lowest) to {PRIORITIES[-1]} "
            f"(highest), or None (not given); not {priority!r}"
        )


def registered(base: Flow, priority: int | None) -> Flow:
    """``base`` (no options, or a child's parent's) with its workflow's registered default
    priority, if any: what a start that gives no priority gets. The registration is a
    deliberate word about this workflow, so it goes before a parent's level."""
    return base if priority is None else dataclasses.replace(base, priority=priority)
