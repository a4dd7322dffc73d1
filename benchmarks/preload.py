"""Fill Sagaway's tables with N ended workflows by SQL, so a scenario runs on a store with history.

``preload(url, n)`` opens the store once (which creates or migrates the schema), then inserts N
workflows (85 % COMPLETED, 10 % FAILED, 5 % CANCELLED; four workflow names; keys like
``ord-00012345``; created over the past year) and 4 steps each, in one transaction, and runs
ANALYZE (PostgreSQL: VACUUM ANALYZE, as autovacuum would have done on a table that old). Rows are
a pure function of their index ``i``, computed in SQL on PostgreSQL (``generate_series``) and in
Python with ``executemany`` on SQLite (no md5 in SQLite), with the same values on both.

The store's own code is not used for the rows: a million calls through the engine would take
hours, and the point is to measure the engine's queries on a large table, not to fill it.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

from sagaway.errors import error_record
from sagaway.store import open_store

YEAR = 365 * 86400.0
NAMES = ("order_saga", "refund_saga", "line_activation", "kyc_check")
PREFIXES = ("ord", "ref", "line", "kyc")
"""Workflow names and key prefixes: ``i % 10`` 0 -> refund, 1 -> line, 2 -> kyc, else order."""
STEPS = ("create_order", "reserve_stock", "charge_payment", "arrange_shipping")

WF_ERROR = error_record("completable", "shop.PaymentDeclined", "[DECLINED] payment declined")
STEP_ERROR = error_record("failed", "shop.PaymentDeclined", "[DECLINED] payment declined")
CANCEL_ERROR = error_record("cancelled", "sagaway.errors.WorkflowCancelled", "customer request")


def name_index(i: int) -> int:
    return (1 + i % 10) if i % 10 < 3 else 0


def status_of(i: int) -> str:
    """10 % FAILED, 5 % CANCELLED, the rest COMPLETED (by ``i % 20``)."""
    s = i % 20
    return "FAILED" if s in (0, 7) else "CANCELLED" if s == 13 else "COMPLETED"


def key_of(i: int) -> str:
    return f"{PREFIXES[name_index(i)]}-{i:08d}"


def expected_counts(n: int) -> dict[str, int]:
    """Rows per status that ``preload(url, n)`` inserts (for checks)."""
    counts = {"COMPLETED": 0, "FAILED": 0, "CANCELLED": 0}
    full, rest = divmod(n, 20)
    for s in range(20):
        counts[status_of(s)] += full + (1 if s < rest else 0)
    return counts


def sample(n: int) -> dict[str, str]:
    """What the history probes ask for: a key in the middle, a name with 10 % of the rows."""
    return {"key": key_of(n // 2), "name": NAMES[1], "status": "FAILED"}


# ---------------------------------------------------------------------- SQLite


def _sqlite_rows(n: int, t0: float) -> Iterator[tuple[Any, ...]]:
    for i in range(n):
        yield _workflow_row(i, n, t0)


def _workflow_row(i: int, n: int, t0: float) -> tuple[Any, ...]:
    run_id = hashlib.md5(f"hist{i}".encode()).hexdigest()  # an id, not security
    key = key_of(i)
    status = status_of(i)
    args = json.dumps({"wf_id": key, "fail_step": None}, separators=(",", ":"))
    created = t0 + (i + (i * 7919 % 1000) / 1000.0) * YEAR / n
    ended = created + 0.05 + (i % 97) * 0.02
    result = (
        '{"status":"completed","steps":["create_order","reserve_stock","charge_payment",'
        '"arrange_shipping"]}'
        if status == "COMPLETED"
        else None
    )
    error = WF_ERROR if status == "FAILED" else CANCEL_ERROR if status == "CANCELLED" else None
    return (
        run_id,
        key,
        NAMES[name_index(i)],
        args,
        hashlib.sha256(args.encode()).hexdigest(),
        status,
        result,
        error,
        created,
        ended,
        ended,
        key,
        "customer request" if status == "CANCELLED" else None,
    )


def _step_rows(wf: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    """COMPLETED: the 4 steps; FAILED: 2 done, charge_payment failed after 3 attempts, one
    compensation; CANCELLED: 2 done, 2 compensations."""
    run_id, status, created, ended = wf[0], wf[5], wf[8], wf[9]
    plan = [("activity", name, "COMPLETED", 1, None) for name in STEPS]
    if status == "FAILED":
        plan[2] = ("activity", "charge_payment", "FAILED", 3, STEP_ERROR)
        plan[3] = ("compensation", "release_stock", "COMPLETED", 1, None)
    elif status == "CANCELLED":
        plan[2] = ("compensation", "release_stock", "COMPLETED", 1, None)
        plan[3] = ("compensation", "cancel_order", "COMPLETED", 1, None)
    span = (ended - created) / 4
    for c, (kind, name, st, attempts, err) in enumerate(plan):
        start = created + c * span
        result = "null" if st == "COMPLETED" else None
        yield (run_id, str(c + 1), kind, name, st, attempts, result, err, start, start + span)


_WF_COLUMNS = (
    "run_id, key, is_current, name, args, args_hash, status, result, error, created_at, "
    "updated_at, ended_at, suspend_count, queue, key_space, cancel_reason"
)
_STEP_COLUMNS = "run_id, call_id, kind, name, status, attempts, result, error, started_at, ended_at"


def _load_sqlite(path: str, n: int, t0: float) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        # A crash mid-load only loses the load: no journal, no syncs, and a cache that holds
        # the indexes the random run_ids are inserted into.
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA cache_size=-2000000")
        conn.execute("BEGIN IMMEDIATE")
        rows = _sqlite_rows(n, t0)
        while chunk := list(itertools.islice(rows, 50_000)):
            conn.executemany(
                f"INSERT INTO workflows ({_WF_COLUMNS}) "
                "VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 'default', ?, ?)",
                chunk,
            )
            conn.executemany(
                f"INSERT INTO steps ({_STEP_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (step for wf in chunk for step in _step_rows(wf)),
            )
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        conn.execute("PRAGMA journal_mode=WAL")  # as the store left it
    finally:
        conn.close()


# ---------------------------------------------------------------------- PostgreSQL

# The same values as _workflow_row / _step_rows, computed by the server. ``s`` = i % 20 picks
# the status, ``m`` = i % 10 the name.
_PG_WORKFLOWS = f"""
INSERT INTO workflows ({_WF_COLUMNS})
SELECT md5('hist' || i), k, true, nm, a, encode(sha256(convert_to(a, 'UTF8')), 'hex'), st,
       CASE WHEN st = 'COMPLETED' THEN
         '{{"status":"completed","steps":["create_order","reserve_stock","charge_payment",'
         || '"arrange_shipping"]}}' END,
       CASE st WHEN 'FAILED' THEN %(wf_error)s WHEN 'CANCELLED' THEN %(cancel_error)s END,
       c, e, e, 0, 'default', k, CASE WHEN st = 'CANCELLED' THEN 'customer request' END
FROM generate_series(0::bigint, %(n)s::bigint - 1) AS i,
LATERAL (SELECT CASE WHEN i %% 20 IN (0, 7) THEN 'FAILED' WHEN i %% 20 = 13 THEN 'CANCELLED'
                     ELSE 'COMPLETED' END AS st,
                (%(names)s::text[])[CASE WHEN i %% 10 < 3 THEN 2 + i %% 10 ELSE 1 END] AS nm,
                (%(prefixes)s::text[])[CASE WHEN i %% 10 < 3 THEN 2 + i %% 10 ELSE 1 END]
                  || '-' || lpad(i::text, 8, '0') AS k,
                (%(t0)s::float8
                 + (i + (i * 7919 %% 1000) / 1000.0)::float8 * %(year)s::float8 / %(n)s)
                  AS c) AS x,
LATERAL (SELECT '{{"wf_id":"' || k || '","fail_step":null}}' AS a,
                c + 0.05 + (i %% 97) * 0.02::float8 AS e) AS y
"""
_PG_STEPS = f"""
INSERT INTO steps ({_STEP_COLUMNS})
SELECT w.run_id, p.call_id::text, p.kind, p.name, p.status, p.attempts,
       CASE WHEN p.status = 'COMPLETED' THEN 'null' END,
       CASE WHEN p.status = 'FAILED' THEN %(step_error)s END,
       w.created_at + (p.call_id - 1) * (w.ended_at - w.created_at) / 4,
       w.created_at + p.call_id * (w.ended_at - w.created_at) / 4
FROM workflows AS w
JOIN (VALUES
  ('COMPLETED', 1, 'activity', 'create_order', 'COMPLETED', 1),
  ('COMPLETED', 2, 'activity', 'reserve_stock', 'COMPLETED', 1),
  ('COMPLETED', 3, 'activity', 'charge_payment', 'COMPLETED', 1),
  ('COMPLETED', 4, 'activity', 'arrange_shipping', 'COMPLETED', 1),
  ('FAILED', 1, 'activity', 'create_order', 'COMPLETED', 1),
  ('FAILED', 2, 'activity', 'reserve_stock', 'COMPLETED', 1),
  ('FAILED', 3, 'activity', 'charge_payment', 'FAILED', 3),
  ('FAILED', 4, 'compensation', 'release_stock', 'COMPLETED', 1),
  ('CANCELLED', 1, 'activity', 'create_order', 'COMPLETED', 1),
  ('CANCELLED', 2, 'activity', 'reserve_stock', 'COMPLETED', 1),
  ('CANCELLED', 3, 'compensation', 'release_stock', 'COMPLETED', 1),
  ('CANCELLED', 4, 'compensation', 'cancel_order', 'COMPLETED', 1)
) AS p (wf_status, call_id, kind, name, status, attempts) ON p.wf_status = w.status
WHERE w.run_id = ANY(
    SELECT md5('hist' || g) FROM generate_series(0::bigint, %(n)s::bigint - 1) AS g)
ORDER BY w.run_id, p.call_id  -- in key order: the primary key is appended to, not split
"""


def _pg_target(url: str) -> tuple[str, str]:
    """(connection URL without ``schema``, schema) of a Sagaway PostgreSQL URL."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parts.query)
    schema = query.pop("schema", ["public"])[0]
    rest = urllib.parse.urlencode({k: v[0] for k, v in query.items()})
    return urllib.parse.urlunsplit(parts._replace(query=rest)), schema


def _load_postgres(url: str, n: int, t0: float) -> None:
    import psycopg
    from psycopg import sql

    conn_url, schema = _pg_target(url)
    params = {
        "n": n,
        "t0": t0,
        "year": YEAR,
        "names": list(NAMES),
        "prefixes": list(PREFIXES),
        "wf_error": WF_ERROR,
        "cancel_error": CANCEL_ERROR,
        "step_error": STEP_ERROR,
    }
    with psycopg.connect(conn_url, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
        with conn.transaction():
            conn.execute("SET LOCAL synchronous_commit = off")
            conn.execute("SET LOCAL work_mem = '256MB'")
            if row is not None and row[0]:
                # No triggers at all (NOTIFY, foreign-key checks): the rows are consistent by
                # construction (a failed step's only attempt error is in its step row).
                conn.execute("SET LOCAL session_replication_role = replica")
            else:
                conn.execute("ALTER TABLE workflows DISABLE TRIGGER USER")  # NOTIFY only
            conn.execute(_PG_WORKFLOWS, params)
            conn.execute(_PG_STEPS, params)
            if row is None or not row[0]:
                conn.execute("ALTER TABLE workflows ENABLE TRIGGER USER")
        conn.execute("VACUUM ANALYZE workflows, steps, attempt_errors")


# ---------------------------------------------------------------------- entry point


async def _migrate(url: str) -> None:
    store = open_store(url)
    await store.open()
    await store.close()


def preload(url: str, n: int, *, now: float | None = None) -> dict[str, Any]:
    """Migrate the store at ``url`` and insert ``n`` ended workflows with 4 steps each; what was
    done (for the JSON record)."""
    t_start = time.perf_counter()
    asyncio.run(_migrate(url))
    t0 = (time.time() if now is None else now) - YEAR - 86400
    if n > 0:
        if url.startswith("sqlite"):
            _load_sqlite(url.removeprefix("sqlite:///"), n, t0)
        else:
            _load_postgres(url, n, t0)
    return {
        "n": n,
        "steps_per_workflow": 4,
        "statuses": expected_counts(n),
        "load_s": round(time.perf_counter() - t_start, 2),
        "sample": sample(n),
    }
