"""DBOS Transact's side of the order-saga workload (``benchmarks/WORKLOAD.md`` §1, §5).

``order_saga`` is a ``@DBOS.workflow()`` (async), each activity and compensation a
``@DBOS.step()`` (async; its side effect runs on a thread through ``Services.aperform``) with DBOS's
own retry options: ``retries_allowed=True, max_attempts=3, interval_seconds=1.0,
backoff_rate=2.0`` and a ``should_retry`` predicate that refuses to retry the business error
``PaymentDeclined``. The workflow id is DBOS's workflow id (``SetWorkflowID(wf_id)``), so a new
process finds it.

Backends (``config["url"]`` is DBOS's ``system_database_url``):

* SQLite with DBOS's default journal (rollback journal, ``synchronous=FULL``), or in WAL mode
  (``config["journal"] == "wal"``): DBOS has no setting for it, but WAL is a persistent property
  of an SQLite file, so the adapter creates the file in WAL mode before DBOS opens it. DBOS's
  connections keep SQLite's default ``synchronous=FULL``.
* PostgreSQL: the ``bench`` database, system schema ``config["schema"]`` (dropped by the
  orchestrator before every scenario), DBOS's default pool (20 connections).

Recovery (scenario C, phase 2): ``DBOS.launch()`` in a new process recovers the PENDING workflows
of its executor id (``local``, the same as the killed process's) and application version (same
code, same version); ``wait_all`` only polls their handles (``DBOS.retrieve_workflow_async``,
``get_result(polling_interval_sec=0.1)``; DBOS's default polling interval is 1 s).

DBOS is a process-wide singleton: one adapter per process.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfig, SetWorkflowID

from benchmarks import workload
from benchmarks.workload import Services

WAIT_POLLING_INTERVAL = 0.1
"""Seconds between status polls of ``wait_all``'s handles (DBOS's default: 1 s)."""

_services: Services | None = None


class PaymentDeclined(Exception):
    """The payment was declined: a business error, never retried."""


def _should_retry(exc: BaseException) -> bool:
    return not isinstance(exc, PaymentDeclined)


def _svc() -> Services:
    if _services is None:
        raise RuntimeError("DBOSAdapter is not open")
    return _services


_STEP_OPTIONS: dict[str, Any] = {
    "retries_allowed": True,
    "max_attempts": workload.RETRY_MAXIMUM_ATTEMPTS,
    "interval_seconds": workload.RETRY_INITIAL_INTERVAL,
    "backoff_rate": workload.RETRY_BACKOFF_COEFFICIENT,
    "should_retry": _should_retry,
}


@DBOS.step(name="create_order", **_STEP_OPTIONS)
async def create_order(wf_id: str) -> None:
    await _svc().aperform("create_order", wf_id)


@DBOS.step(name="reserve_stock", **_STEP_OPTIONS)
async def reserve_stock(wf_id: str) -> None:
    await _svc().aperform("reserve_stock", wf_id)


@DBOS.step(name="charge_payment", **_STEP_OPTIONS)
async def charge_payment(wf_id: str, fail: bool) -> None:
    if fail:
        raise PaymentDeclined(f"payment of {wf_id} declined")
    await _svc().aperform("charge_payment", wf_id)


@DBOS.step(name="arrange_shipping", **_STEP_OPTIONS)
async def arrange_shipping(wf_id: str) -> None:
    await _svc().aperform("arrange_shipping", wf_id)


@DBOS.step(name="cancel_order", **_STEP_OPTIONS)
async def cancel_order(wf_id: str) -> None:
    await _svc().aperform("cancel_order", wf_id)


@DBOS.step(name="release_stock", **_STEP_OPTIONS)
async def release_stock(wf_id: str) -> None:
    await _svc().aperform("release_stock", wf_id)


_COMPENSATIONS: dict[str, Callable[[str], Awaitable[None]]] = {
    "create_order": cancel_order,
    "reserve_stock": release_stock,
}


@DBOS.workflow(name="order_saga")
async def order_saga(wf_id: str, fail_step: str | None) -> dict[str, Any]:
    done: list[str] = []
    step = "create_order"
    try:
        await create_order(wf_id)
        done.append(step)
        step = "reserve_stock"
        await reserve_stock(wf_id)
        done.append(step)
        step = "charge_payment"
        await charge_payment(wf_id, fail_step == "charge_payment")
        done.append(step)
        step = "arrange_shipping"
        await arrange_shipping(wf_id)
        done.append(step)
    except Exception:
        # Saga rule: compensate the completed steps in reverse order, then complete normally.
        compensated: list[str] = []
        for completed in reversed(done):
            compensation = _COMPENSATIONS.get(completed)
            if compensation is not None:
                await compensation(wf_id)
                compensated.append(workload.COMPENSATION_OF[completed])
        return {"status": "compensated", "failed_step": step, "compensated": compensated}
    return {"status": "completed", "steps": done}


def _prepare_wal(url: str) -> None:
    """Create the SQLite file in WAL mode (persistent) before DBOS opens it."""
    path = Path(url.removeprefix("sqlite:///"))
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    try:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    finally:
        conn.close()
    if mode != "wal":
        raise RuntimeError(f"could not put {path} in WAL mode (got {mode!r})")


class DBOSAdapter:
    """Launch DBOS in this process, start workflows by id, wait for them, destroy DBOS."""

    name = "dbos"

    def __init__(self, config: dict[str, Any], services: Services) -> None:
        self.url: str = config["url"]
        self.journal: str = config.get("journal", "default")
        self.schema: str | None = config.get("schema")
        self.services = services
        self._version: str | None = None

    def _config(self) -> DBOSConfig:
        config: DBOSConfig = {
            "name": "order-saga-bench",
            "system_database_url": self.url,
            "log_level": "WARNING",
        }
        if self.schema is not None and not self.url.startswith("sqlite"):
            config["dbos_system_schema"] = self.schema
        return config

    async def open(self, recover: bool = False) -> None:
        # Recovery needs nothing special: launch() recovers this executor's PENDING workflows.
        global _services
        _services = self.services
        if self.url.startswith("sqlite") and self.journal == "wal":
            _prepare_wal(self.url)
        DBOS(config=self._config())
        await asyncio.to_thread(DBOS.launch)

    async def start(self, wf_id: str, fail_step: str | None) -> Any:
        with SetWorkflowID(wf_id):
            return await DBOS.start_workflow_async(order_saga, wf_id, fail_step)

    async def result(self, handle: Any) -> dict[str, Any]:
        result: dict[str, Any] = await handle.get_result()
        return result

    async def wait_all(self, ids: Sequence[str]) -> dict[str, Any]:
        async def one(wf_id: str) -> Any:
            try:
                handle: Any = await DBOS.retrieve_workflow_async(wf_id)
                return await handle.get_result(polling_interval_sec=WAIT_POLLING_INTERVAL)
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"

        results = await asyncio.gather(*(one(i) for i in ids))
        return dict(zip(ids, results, strict=True))

    async def counts(self) -> dict[str, int]:
        statuses = await DBOS.list_workflows_async(load_input=False, load_output=False)
        counts: dict[str, int] = {}
        for status in statuses:
            counts[status.status] = counts.get(status.status, 0) + 1
        return counts

    def describe(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "version": metadata.version("dbos"),
            "system_database_url": self.url,
            "sqlite_journal": (
                None
                if not self.url.startswith("sqlite")
                else ("wal (file created in WAL mode)" if self.journal == "wal" else "default")
            ),
            "system_schema": self.schema if not self.url.startswith("sqlite") else None,
            "step_retry": {k: v for k, v in _STEP_OPTIONS.items() if k != "should_retry"},
            "should_retry": "not PaymentDeclined",
            "wait_polling_interval_s": WAIT_POLLING_INTERVAL,
            "log_level": "WARNING",
            "other": "DBOS defaults (executor id 'local', sys_db_pool_size 20 on PostgreSQL)",
        }
        return record

    async def close(self) -> None:
        global _services
        await asyncio.to_thread(DBOS.destroy)
        _services = None
