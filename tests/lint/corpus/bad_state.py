# ruff: noqa
"""SW601: workflow code that depends on mutable module-level state."""

from __future__ import annotations

import collections

import sagaway as sw

manager = sw.Manager()

SEEN: set[str] = set()
CACHE: dict[str, bool] = {}
PENDING = collections.deque()
TOTALS = []
RATES = {"EUR": 1.1}  # never mutated by any function: a constant, not reported


@manager.register_activity
async def remember(order: str) -> None:
    CACHE[order] = True


@manager.register_activity
async def charge(order: str, rate: float) -> str:
    return order


@manager.register_workflow
async def dedupe(order: str) -> str:
    if order in SEEN:
        return "duplicate"
    SEEN.add(order)  # expect: SW601
    if CACHE.get(order):  # expect: SW601
        return "cached"
    PENDING.append(order)  # expect: SW601
    return await charge(order, RATES["EUR"])


def record_total(value: int) -> None:
    TOTALS.append(value)  # expect: SW601


@manager.register_workflow
async def totals(value: int) -> None:
    record_total(value)


COUNTER = [0]


@manager.register_workflow
async def counts() -> int:
    global COUNTER
    COUNTER = COUNTER + [1]  # expect: SW601
    return len(COUNTER)
