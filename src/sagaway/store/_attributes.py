"""The part of a listing's query that filters by search attributes (``ListQuery.attributes``).

A page is the newest matching executions. Where the filters say which executions match
matters less than reading them in page order and stopping at the page's end, so the query is
driven by one filter when it can be:

* the first filter on one type drives. An equality (``customer = '4711'``, ``amount = 12``)
  reads its rows from the index ``(name, value, created_at DESC, run_id)`` in page order
  (each row carries its execution's ``created_at``), each joined to its execution by primary
  key, so a page costs about its own rows whether 10 or 200,000 executions match. A range
  (``amount >= 100``) reads the rows in its range from the same index, then keeps the newest:
  as many as match it;
* without one (only values that may be text or a number), the first filter is a set of
  executions read from its index (``run_id IN (...)``);
* every other filter is a probe of the attribute's primary key ``(run_id, name)`` per
  candidate row (``EXISTS``).

The comparison operator is one of five fixed strings; names and values are always bound
parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sagaway.store.records import AttributeFilter

OPERATORS = frozenset({"=", "<", "<=", ">", ">="})
_DRIVER_ORDER = "ORDER BY attr_at DESC, attr_run"


def plan(
    filters: Sequence[AttributeFilter],
    p: Callable[[str], str],
    params: dict[str, Any],
    *,
    join: str = "JOIN",
) -> tuple[str, str | None, list[str]]:
    """The page's source (``workflows``, or the driving filter joined to it with ``join``), its
    ORDER BY (None: the listing's own) and its conditions; adds the filters' parameters to
    ``params``. SQLite's ``CROSS JOIN`` keeps the driving filter the outer loop: on a range,
    its planner would otherwise walk every execution in page order, probing each."""
    for f in filters:
        _check(f)
    driver = next((i for i, f in enumerate(filters) if _one_type(f)), None)
    conditions = []
    source, order = "workflows", None
    for i, f in enumerate(filters):
        compared = _comparisons(i, f, p, params)
        if i == driver:
            ((column, value),) = compared
            source = (
                f"(SELECT run_id AS attr_run, created_at AS attr_at FROM search_attributes "
                f"WHERE name = {p(f'attr_{i}_name')} AND {column} {f.op} {value}) AS attr "
                f"{join} workflows ON workflows.run_id = attr.attr_run"
            )
            order = _DRIVER_ORDER
        elif driver is None and i == 0:
            selects = " UNION ALL ".join(
                f"SELECT run_id FROM search_attributes WHERE name = {p(f'attr_{i}_name')} "
                f"AND {column} {f.op} {value}"
                for column, value in compared
            )
            conditions.append(f"run_id IN ({selects})")
        else:
            either = " OR ".join(f"b.{column} {f.op} {value}" for column, value in compared)
            conditions.append(
                f"EXISTS (SELECT 1 FROM search_attributes AS b WHERE b.run_id = "
                f"workflows.run_id AND b.name = {p(f'attr_{i}_name')} AND ({either}))"
            )
    return source, order, conditions


def _check(f: AttributeFilter) -> None:
    if f.op not in OPERATORS:  # never spliced unless it is one of these
        raise ValueError(f"unknown comparison {f.op!r}; use one of {sorted(OPERATORS)}")
    if f.text is None and f.number is None:
        raise ValueError(f"search attribute filter on {f.name!r} has no value")


def _one_type(f: AttributeFilter) -> bool:
    return (f.text is None) != (f.number is None)


def _comparisons(
    i: int, f: AttributeFilter, p: Callable[[str], str], params: dict[str, Any]
) -> list[tuple[str, str]]:
    """(column, parameter placeholder) of each value the filter compares."""
    params[f"attr_{i}_name"] = f.name
    out = []
    for column, value, label in (("str_value", f.text, "text"), ("num_value", f.number, "number")):
        if value is not None:
            params[f"attr_{i}_{label}"] = value
            out.append((column, p(f"attr_{i}_{label}")))
    return out
