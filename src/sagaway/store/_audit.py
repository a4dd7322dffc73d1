"""The audit trail in the SQL stores (``audit_log``): the parameters, rows and listing query
both dialects share (the writes and verbs: ``sqlite.audit``, ``postgres.audit``).

An entry is written by the verb that makes the change, in its transaction and only when it
changed something: a cancel refused (the workflow had ended) or a retry of a workflow that is
not SUSPENDED leaves none, and a transaction that rolls back takes its entry with it. What the
entry is about comes from the verb: an execution's entry reads the run id and key from the
workflow row in the same statement (``insert_audit_for_run``), so a caller cannot name another
key than the one it acted on. ``entry_id`` is unique: a verb run again (a PostgreSQL
transaction retried after a lost acknowledgement, a client call tried again through an outage)
writes its entry once.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from sagaway.store._listing import POSTGRES, SQLITE, Dialect
from sagaway.store._rows import Row
from sagaway.store.records import AuditNote, AuditQuery, AuditRecord
from sagaway.store.sql import queries

T = TypeVar("T")
_Q = queries("sqlite")

COLUMNS = "seq, at, actor, on_behalf_of, action, run_id, target, reason, details"
DIALECTS = {"sqlite": SQLITE, "postgres": POSTGRES}


def params(
    note: AuditNote, *, run_id: str | None = None, target: str | None = None
) -> dict[str, Any]:
    """``insert_audit_for_run`` (with ``run_id``) or ``insert_audit`` (``target``: a schedule
    id, or None for a purge)."""
    return {
        "entry_id": note.entry_id,
        "actor": note.actor,
        "on_behalf_of": note.on_behalf_of,
        "action": note.action,
        "run_id": run_id,
        "target": target,
        "reason": note.reason,
        "details": note.details,
    }


def record_from_row(row: Row) -> AuditRecord:
    return AuditRecord(
        seq=int(row["seq"]),
        at=float(row["at"]),
        actor=row["actor"],
        on_behalf_of=row["on_behalf_of"],
        action=row["action"],
        run_id=row["run_id"],
        target=row["target"],
        reason=row["reason"],
        details=row["details"],
    )


_BOUNDS = (
    ("before", "seq < {param}"),
    ("since", "at >= {param}"),
    ("until", "at < {param}"),
    ("run_id", "run_id = {param}"),
    ("target", "target = {param}"),
    ("actor", "(actor = {param} OR on_behalf_of = {param})"),
)
"""The filters of an audit page by a bound parameter: each value given adds its condition."""


def list_query(dialect: Dialect, query: AuditQuery) -> tuple[str, dict[str, Any]]:
    """The SQL text and parameters of a page of the trail, composed of fixed fragments for
    the filters given (values are always bound parameters): newest first, by ``seq``."""
    p = dialect.param
    where = ["TRUE"]
    values: dict[str, Any] = {
        "before": query.before_seq,
        "since": query.since,
        "until": query.until,
        "run_id": query.run_id,
        "target": query.target,
        "actor": query.actor,
        "actions": _array(sorted(query.actions), dialect),
        "limit": dialect.no_limit if query.limit < 0 else query.limit,
    }
    where.extend(bound.format(param=p(name)) for name, bound in _BOUNDS if values[name] is not None)
    if query.actions:
        where.append(
            "action = ANY(%(actions)s::text[])"
            if dialect.arrays
            else "action IN (SELECT value FROM json_each(:actions))"
        )
    text = (
        f"SELECT {COLUMNS} FROM audit_log WHERE {' AND '.join(where)} "
        f"ORDER BY seq DESC LIMIT {p('limit')}"
    )
    return text, values


def _array(values: list[str], dialect: Dialect) -> Any:
    return values if dialect.arrays else json.dumps(values)


# ---------------------------------------------------------------------------- SQLite
