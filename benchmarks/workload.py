"""The engine-independent part of the order-saga workload (``benchmarks/WORKLOAD.md`` §1 to §3).

Steps, services, expected results, the side effect into per-service databases (SQLite files or
PostgreSQL schemas ``svc_<service>``, §2) with the gate of scenario C, the service-table check, a
row counter for the crash orchestrator, and the latency statistics. Nothing here imports an
engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
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

_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS effects (
  workflow_id   TEXT    NOT NULL,
  step          TEXT    NOT NULL,
  applied_count INTEGER NOT NULL DEFAULT 1,
  first_at      TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
  PRIMARY KEY (workflow_id, step))
"""

_PG_SCHEMA = """
CREATE TABLE {schema}.effects (
  workflow_id   TEXT        NOT NULL,
  step          TEXT        NOT NULL,
  applied_count INTEGER     NOT NULL DEFAULT 1,
  first_at      TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (workflow_id, step))
"""

_UPSERT = (
    "INSERT INTO effects(workflow_id, step) VALUES (?, ?) "
    "ON CONFLICT (workflow_id, step) DO UPDATE SET applied_count = effects.applied_count + 1"
)
_PG_UPSERT = (
    "INSERT INTO {schema}.effects(workflow_id, step) VALUES (%s, %s) "
    "ON CONFLICT (workflow_id, step) DO UPDATE SET applied_count = effects.applied_count + 1"
)

PG_SERVICE_PREFIX = "svc_"
"""PostgreSQL service schemas are ``svc_<service>`` in the benchmark database."""


def _connect(path: Path) -> sqlite3.Connection:
    # isolation_level=None: autocommit, so the upsert is one auto-committed statement.
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def _pg_connect(url: str) -> Any:
    import psycopg

    # autocommit: the upsert is one auto-committed statement, as on SQLite.
    return psycopg.connect(url, autocommit=True, connect_timeout=30)


class _Pool:
    """A bounded, thread-safe pool of connections to one service database."""

    def __init__(self, connect: Callable[[], Any], size: int) -> None:
        self._connect = connect
        self._size = size
        self._idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self._created = 0
        self._lock = threading.Lock()
        self._all: list[Any] = []

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        try:
            conn = self._idle.get_nowait()
        except queue.Empty:
            conn = self._new_or_wait()
        try:
            yield conn
        finally:
            self._idle.put(conn)

    def _new_or_wait(self) -> Any:
        with self._lock:
            if self._created < self._size:
                self._created += 1
                create = True
            else:
                create = False
        if not create:
            return self._idle.get()  # blocks: at most `size` connections per service
        try:
            conn = self._connect()
        except BaseException:
            with self._lock:
                self._created -= 1
            raise
        with self._lock:
            self._all.append(conn)
        return conn

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                with contextlib.suppress(Exception):
                    conn.close()
            self._all.clear()
            self._created = 0
        while True:
            try:
                self._idle.get_nowait()
            except queue.Empty:
                break


class Services:
    """The four service databases: SQLite files or PostgreSQL schemas (WORKLOAD.md §2).

    * ``{"kind": "sqlite", "dir": D}``: ``D/<service>.db`` (WAL, ``synchronous=NORMAL``,
      ``busy_timeout`` 30 s).
    * ``{"kind": "postgres", "url": U}``: schema ``svc_<service>`` in the database at ``U``.

    ``perform`` (sync) and ``aperform`` (async, on a thread) wait while the *gate* is closed
    (scenario C, phase 1: every workflow is started before any side effect runs).
    """

    def __init__(self, spec: dict[str, Any], pool_size: int = SVC_POOL_SIZE) -> None:
        self.spec = dict(spec)
        self.kind: str = spec["kind"]
        if self.kind not in ("sqlite", "postgres"):
            raise ValueError(f"unknown service backend {self.kind!r}")
        self._gate = threading.Event()
        self._gate.set()
        self._pools: dict[str, _Pool] = {}
        self._sql: dict[str, str] = {}
        for service in SERVICES:
            connect: Callable[[], Any]
            if self.kind == "sqlite":
                connect = functools.partial(_connect, self._path(service))
                self._sql[service] = _UPSERT
            else:
                connect = functools.partial(_pg_connect, spec["url"])
                self._sql[service] = _PG_UPSERT.format(schema=self.schema(service))
            self._pools[service] = _Pool(connect, pool_size)

    @staticmethod
    def schema(service: str) -> str:
        return f"{PG_SERVICE_PREFIX}{service}"

    def _path(self, service: str) -> Path:
        return Path(self.spec["dir"]) / f"{service}.db"

    def describe(self) -> str:
        if self.kind == "sqlite":
            return "sqlite files (WAL, synchronous=NORMAL, busy_timeout 30 s)"
        return f"postgresql schemas {PG_SERVICE_PREFIX}<service> (autocommit upserts)"

    def create(self) -> None:
        """Create fresh databases (SQLite) or drop and recreate the schemas (PostgreSQL)."""
        if self.kind == "sqlite":
            Path(self.spec["dir"]).mkdir(parents=True, exist_ok=True)
            for service in SERVICES:
                path = self._path(service)
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
                conn = _connect(path)
                try:
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.execute(_SQLITE_SCHEMA)
                finally:
                    conn.close()
            return
        with _pg_connect(self.spec["url"]) as conn:
            for service in SERVICES:
                schema = self.schema(service)
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
                conn.execute(f"CREATE SCHEMA {schema}")
                conn.execute(_PG_SCHEMA.format(schema=schema))

    def drop(self) -> None:
        """Remove the PostgreSQL schemas (SQLite files go with their workdir)."""
        if self.kind == "postgres":
            with _pg_connect(self.spec["url"]) as conn:
                for service in SERVICES:
                    conn.execute(f"DROP SCHEMA IF EXISTS {self.schema(service)} CASCADE")

    def close_gate(self) -> None:
        self._gate.clear()

    def open_gate(self) -> None:
        self._gate.set()

    def perform(self, step: str, wf_id: str) -> None:
        """The side effect of ``step`` of workflow ``wf_id``: one auto-committed upsert."""
        if not self._gate.is_set():
            self._gate.wait()
        service = SERVICE_OF[step]
        with self._pools[service].connection() as conn:
            conn.execute(self._sql[service], (wf_id, step))

    async def aperform(self, step: str, wf_id: str) -> None:
        """``perform`` on a thread of the running loop's default executor."""
        await asyncio.to_thread(self.perform, step, wf_id)

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()

    def _rows(self, service: str) -> list[tuple[str, str, int]]:
        if self.kind == "sqlite":
            conn = _connect(self._path(service))
            try:
                return conn.execute(
                    "SELECT workflow_id, step, applied_count FROM effects"
                ).fetchall()
            finally:
                conn.close()
        with _pg_connect(self.spec["url"]) as pg:
            cur = pg.execute(
                f"SELECT workflow_id, step, applied_count FROM {self.schema(service)}.effects"
            )
            return [(str(a), str(b), int(c)) for a, b, c in cur.fetchall()]

    def check(
        self, workflows: dict[str, str | None], allow_reexecution: bool = False
    ) -> dict[str, Any]:
        """Compare the tables with what ``workflows`` (id -> fail_step) must have left.

        Returns missing / unexpected rows, re-executed effects (sum of applied_count - 1),
        rows per step, and ``ok`` (re-executed effects are only ``ok`` with
        ``allow_reexecution``: scenario C, at-least-once steps).
        """
        expected: set[tuple[str, str, str]] = set()
        for wf_id, fail_step in workflows.items():
            for service, steps in expected_effects(fail_step).items():
                expected.update((service, wf_id, step) for step in steps)
        found: set[tuple[str, str, str]] = set()
        per_step: dict[str, int] = {}
        reexec_per_step: dict[str, int] = {}
        applied_total = 0
        reexecuted = 0
        for service in SERVICES:
            for wf_id, step, count in self._rows(service):
                found.add((service, wf_id, step))
                per_step[step] = per_step.get(step, 0) + 1
                applied_total += count
                reexecuted += count - 1
                if count > 1:
                    reexec_per_step[step] = reexec_per_step.get(step, 0) + count - 1
        missing = sorted(expected - found)
        unexpected = sorted(found - expected)
        return {
            "ok": not missing and not unexpected and (allow_reexecution or reexecuted == 0),
            "expected_rows": len(expected),
            "rows": len(found),
            "missing_rows": len(missing),
            "unexpected_rows": len(unexpected),
            "applied_count_sum": applied_total,
            "reexecuted_effects": reexecuted,
            "reexecuted_per_step": dict(sorted(reexec_per_step.items())),
            "rows_per_step": dict(sorted(per_step.items())),
            "missing_sample": [list(r) for r in missing[:5]],
            "unexpected_sample": [list(r) for r in unexpected[:5]],
        }


class RowCounter:
    """Counts rows per service from another process (the crash orchestrator), cheaply."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self._sqlite: dict[str, sqlite3.Connection] = {}
        self._pg: Any = None

    def count(self, service: str) -> int:
        if self.spec["kind"] == "sqlite":
            conn = self._sqlite.get(service)
            if conn is None:
                path = Path(self.spec["dir"]) / f"{service}.db"
                conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
                conn.execute("PRAGMA busy_timeout = 30000")
                self._sqlite[service] = conn
            return int(conn.execute("SELECT count(*) FROM effects").fetchone()[0])
        if self._pg is None:
            self._pg = _pg_connect(self.spec["url"])
        row = self._pg.execute(
            f"SELECT count(*) FROM {Services.schema(service)}.effects"
        ).fetchone()
        return int(row[0])

    def counts(self) -> dict[str, int]:
        return {service: self.count(service) for service in SERVICES}

    def close(self) -> None:
        for conn in self._sqlite.values():
            conn.close()
        self._sqlite.clear()
        if self._pg is not None:
            self._pg.close()
            self._pg = None


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
