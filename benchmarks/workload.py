"""The engine-independent part of the order-saga workload (WORKLOAD.md §1 to §3).

Steps, services, expected results, the side effect into per-service SQLite databases, the
service-table check and the latency statistics. Nothing here imports Sagaway.
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

STEPS: tuple[str, ...] = ("create_order", "reserve_stock", "charge_payment", "arrange_shipping")
"""The four activities, in the order the workflow calls them."""

COMPENSATION_OF: dict[str, str] = {"create_order": "cancel_order", "reserve_stock": "release_stock"}
"""Step -> its compensation (charge_payment and arrange_shipping have none)."""

SERVICE_OF: dict[str, str] = {
    "create_order": "orders",
    "cancel_order": "orders",
    "reserve_stock": "inventory",
    "release_stock": "inventory",
    "charge_payment": "payments",
    "arrange_shipping": "shipping",
}
"""Activity -> the service database its side effect goes to."""

SERVICES: tuple[str, ...] = ("orders", "inventory", "payments", "shipping")

FAIL_STEP = "charge_payment"
"""The only step scenario B makes fail (with the business error PaymentDeclined)."""

RETRY_MAXIMUM_ATTEMPTS = 3
RETRY_INITIAL_INTERVAL = 1.0
RETRY_BACKOFF_COEFFICIENT = 2.0

WARMUP = 20
"""W: warm-up workflows run before the measured ones (not timed, but checked)."""

SVC_POOL_SIZE = int(os.environ.get("BENCH_SVC_POOL_SIZE", "8"))
"""Connections per service per process."""

SUCCESS_RESULT: dict[str, Any] = {"status": "completed", "steps": list(STEPS)}
COMPENSATED_RESULT: dict[str, Any] = {
    "status": "compensated",
    "failed_step": "charge_payment",
    "compensated": ["release_stock", "cancel_order"],
}


def expected_result(fail_step: str | None) -> dict[str, Any]:
    """What ``order_saga(wf_id, fail_step)`` must return (compared as JSON)."""
    return COMPENSATED_RESULT if fail_step == FAIL_STEP else SUCCESS_RESULT


def expected_effects(fail_step: str | None) -> dict[str, set[str]]:
    """Service -> the steps whose rows one workflow must leave in it."""
    if fail_step == FAIL_STEP:
        return {
            "orders": {"create_order", "cancel_order"},
            "inventory": {"reserve_stock", "release_stock"},
            "payments": set(),
            "shipping": set(),
        }
    return {
        "orders": {"create_order"},
        "inventory": {"reserve_stock"},
        "payments": {"charge_payment"},
        "shipping": {"arrange_shipping"},
    }


# ---------------------------------------------------------------------- service databases

_SCHEMA = """
CREATE TABLE IF NOT EXISTS effects (
  workflow_id   TEXT    NOT NULL,
  step          TEXT    NOT NULL,
  applied_count INTEGER NOT NULL DEFAULT 1,
  first_at      TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
  PRIMARY KEY (workflow_id, step))
"""

_UPSERT = (
    "INSERT INTO effects(workflow_id, step) VALUES (?, ?) "
    "ON CONFLICT (workflow_id, step) DO UPDATE SET applied_count = applied_count + 1"
)


def _connect(path: Path) -> sqlite3.Connection:
    # isolation_level=None: autocommit, so the upsert is one auto-committed statement.
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


class _Pool:
    """A bounded, thread-safe pool of connections to one service database."""

    def __init__(self, path: Path, size: int) -> None:
        self._path = path
        self._size = size
        self._idle: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._created = 0
        self._lock = threading.Lock()
        self._all: list[sqlite3.Connection] = []

    @contextlib.contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = self._idle.get_nowait()
        except queue.Empty:
            conn = self._new_or_wait()
        try:
            yield conn
        finally:
            self._idle.put(conn)

    def _new_or_wait(self) -> sqlite3.Connection:
        with self._lock:
            if self._created < self._size:
                self._created += 1
                create = True
            else:
                create = False
        if not create:
            return self._idle.get()  # blocks: at most `size` connections per service
        conn = _connect(self._path)
        with self._lock:
            self._all.append(conn)
        return conn

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()


class Services:
    """The four service databases of one workdir: ``<workdir>/services/<service>.db``."""

    def __init__(self, workdir: Path, pool_size: int = SVC_POOL_SIZE) -> None:
        self.dir = workdir / "services"
        self._pools = {s: _Pool(self.dir / f"{s}.db", pool_size) for s in SERVICES}

    def create(self) -> None:
        """Create the (fresh) databases and their ``effects`` tables."""
        self.dir.mkdir(parents=True, exist_ok=True)
        for service in SERVICES:
            conn = _connect(self.dir / f"{service}.db")
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute(_SCHEMA)
            finally:
                conn.close()

    def perform(self, step: str, wf_id: str) -> None:
        """The side effect of ``step`` of workflow ``wf_id``: one auto-committed upsert."""
        with self._pools[SERVICE_OF[step]].connection() as conn:
            conn.execute(_UPSERT, (wf_id, step))

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()

    def check(self, workflows: dict[str, str | None]) -> dict[str, Any]:
        """Compare the tables with what ``workflows`` (id -> fail_step) must have left.

        Returns missing / unexpected rows, re-executed effects (sum of applied_count - 1),
        rows per step, and ``ok``.
        """
        expected: set[tuple[str, str, str]] = set()
        for wf_id, fail_step in workflows.items():
            for service, steps in expected_effects(fail_step).items():
                expected.update((service, wf_id, step) for step in steps)
        found: set[tuple[str, str, str]] = set()
        per_step: dict[str, int] = {}
        applied_total = 0
        reexecuted = 0
        for service in SERVICES:
            conn = _connect(self.dir / f"{service}.db")
            try:
                rows = conn.execute(
                    "SELECT workflow_id, step, applied_count FROM effects"
                ).fetchall()
            finally:
                conn.close()
            for wf_id, step, count in rows:
                found.add((service, wf_id, step))
                per_step[step] = per_step.get(step, 0) + 1
                applied_total += count
                reexecuted += count - 1
        missing = sorted(expected - found)
        unexpected = sorted(found - expected)
        return {
            "ok": not missing and not unexpected and reexecuted == 0,
            "expected_rows": len(expected),
            "rows": len(found),
            "missing_rows": len(missing),
            "unexpected_rows": len(unexpected),
            "applied_count_sum": applied_total,
            "reexecuted_effects": reexecuted,
            "rows_per_step": dict(sorted(per_step.items())),
            "missing_sample": [list(r) for r in missing[:5]],
            "unexpected_sample": [list(r) for r in unexpected[:5]],
        }


# ---------------------------------------------------------------------- statistics


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (``p`` in 0..100) of already sorted values."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def latency_stats_ms(latencies_s: Sequence[float]) -> dict[str, float]:
    values = sorted(x * 1000 for x in latencies_s)
    if not values:
        return {k: math.nan for k in ("p50", "p90", "p99", "max", "mean")}
    return {
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "max": values[-1],
        "mean": sum(values) / len(values),
    }
