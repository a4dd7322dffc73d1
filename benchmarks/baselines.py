"""The two baselines: "no engine" and "minimal hand-written checkpointing" (WORKLOAD.md §6).

Both run the same saga in plain asyncio (``run_saga``): four steps in order, each retried by hand
(3 attempts, 1 s, x2; ``PaymentDeclined`` never retried), compensations of the completed steps in
reverse order on a failure. Each workflow is an asyncio task of this process.

* ``NoEngineAdapter``: the side effects alone, no durability (no scenario C).
* ``CheckpointAdapter``: what an expert writes by hand with raw SQL, one commit for the start
  (``INSERT`` of the workflow row), one per step (``INSERT`` of the step row, after its side
  effect) and one for the end (``UPDATE`` with the result); no batching across workflows. A step
  and its checkpoint share one hop to a thread. Recovery: a new process loads the ``running``
  workflows and their recorded steps and resumes each after its last recorded step (a step whose
  effect ran but whose checkpoint was not committed runs again). SQLite: ``<workdir>/engine.db``,
  WAL, ``synchronous=NORMAL`` (as Sagaway's default); PostgreSQL: schema ``config["schema"]`` in
  the ``bench`` database. A pool of 10 connections (Sagaway's PostgreSQL default pool size;
``config["pool_size"]`` changes it: ``benchmarks.network`` gives both 5).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from benchmarks import workload
from benchmarks.workload import Services, _Pool

CHECKPOINT_POOL_SIZE = 10


class PaymentDeclined(Exception):
    """The payment was declined: a business error, never retried."""


StepRunner = Callable[[str, str, bool], Awaitable[None]]
"""(step, wf_id, fail) -> runs the step (its side effect, and its checkpoint if any)."""


async def _with_retry(run: Callable[[], Awaitable[None]]) -> None:
    delay = workload.RETRY_INITIAL_INTERVAL
    for attempt in range(1, workload.RETRY_MAXIMUM_ATTEMPTS + 1):
        try:
            await run()
            return
        except PaymentDeclined:
            raise
        except Exception:
            if attempt == workload.RETRY_MAXIMUM_ATTEMPTS:
                raise
            await asyncio.sleep(delay)
            delay *= workload.RETRY_BACKOFF_COEFFICIENT


async def run_saga(
    wf_id: str, fail_step: str | None, run_step: StepRunner, done_before: frozenset[str]
) -> dict[str, Any]:
    """The order saga; steps in ``done_before`` were recorded by a previous process."""

    async def step(name: str, fail: bool = False) -> None:
        if name not in done_before:
            await _with_retry(lambda: run_step(name, wf_id, fail))

    done: list[str] = []
    current = workload.STEPS[0]
    try:
        for current in workload.STEPS:
            await step(current, current == "charge_payment" and fail_step == "charge_payment")
            done.append(current)
    except Exception:
        compensated: list[str] = []
        for completed in reversed(done):
            compensation = workload.COMPENSATION_OF.get(completed)
            if compensation is not None:
                await step(compensation)
                compensated.append(compensation)
        return {"status": "compensated", "failed_step": current, "compensated": compensated}
    return {"status": "completed", "steps": done}


# ---------------------------------------------------------------------- no engine


class NoEngineAdapter:
    """The side effects alone: each workflow is an asyncio task, nothing is recorded."""

    name = "none"

    def __init__(self, config: dict[str, Any], services: Services) -> None:
        self.services = services

    async def open(self, recover: bool = False) -> None:
        if recover:
            raise NotImplementedError("no engine: nothing to recover")

    async def _run_step(self, step: str, wf_id: str, fail: bool) -> None:
        if fail:
            raise PaymentDeclined(f"payment of {wf_id} declined")
        await self.services.aperform(step, wf_id)

    async def start(self, wf_id: str, fail_step: str | None) -> asyncio.Task[dict[str, Any]]:
        return asyncio.create_task(run_saga(wf_id, fail_step, self._run_step, frozenset()))

    async def result(self, handle: asyncio.Task[dict[str, Any]]) -> dict[str, Any]:
        return await handle

    async def wait_all(self, ids: Sequence[str]) -> dict[str, Any]:
        raise NotImplementedError("no engine: no recovery")

    async def counts(self) -> dict[str, int] | None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"durability": "none", "activities": "async def + asyncio.to_thread"}

    async def close(self) -> None:
        return None


# ---------------------------------------------------------------------- minimal checkpointing


class CheckpointAdapter:
    """Raw-SQL checkpoints: one commit for the start, one per step, one for the end."""

    name = "checkpoint"

    def __init__(self, config: dict[str, Any], services: Services) -> None:
        self.services = services
        self.kind: str = config["kind"]  # sqlite | postgres
        self.config = config
        self._pool: _Pool | None = None
        self._tasks: dict[str, asyncio.Task[dict[str, Any]]] = {}
        self._param = "?" if self.kind == "sqlite" else "%s"
        self._prefix = "" if self.kind == "sqlite" else f"{config['schema']}."
        self.pool_size: int = int(config.get("pool_size", CHECKPOINT_POOL_SIZE))

    # -- SQL helpers (run on a thread)

    def _connect(self) -> Any:
        if self.kind == "sqlite":
            conn = sqlite3.connect(
                self.config["path"], timeout=30.0, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA busy_timeout = 30000")
            conn.execute("PRAGMA synchronous = NORMAL")
            return conn
        import psycopg

        return psycopg.connect(self.config["url"], autocommit=True, connect_timeout=30)

    def _commit(self, sql: str, params: tuple[Any, ...]) -> None:
        """One statement in its own transaction (auto-commit: one commit)."""
        assert self._pool is not None
        with self._pool.connection() as conn:
            conn.execute(sql, params)

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        assert self._pool is not None
        with self._pool.connection() as conn:
            return list(conn.execute(sql, params).fetchall())

    def _create_tables(self) -> None:
        conn = self._connect()
        try:
            if self.kind == "sqlite":
                conn.execute("PRAGMA journal_mode = WAL")
            else:
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.config['schema']}")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self._prefix}ckpt_workflow ("
                "id TEXT PRIMARY KEY, fail_step TEXT, status TEXT NOT NULL, result TEXT)"
            )
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self._prefix}ckpt_step ("
                "workflow_id TEXT NOT NULL, step TEXT NOT NULL, "
                "PRIMARY KEY (workflow_id, step))"
            )
        finally:
            conn.close()

    # -- adapter

    async def open(self, recover: bool = False) -> None:
        self._pool = _Pool(self._connect, self.pool_size)
        await asyncio.to_thread(self._create_tables)
        if not recover:
            return
        p = self._param
        running = await asyncio.to_thread(
            self._query,
            f"SELECT id, fail_step FROM {self._prefix}ckpt_workflow WHERE status = {p}",
            ("running",),
        )
        steps = await asyncio.to_thread(
            self._query,
            f"SELECT s.workflow_id, s.step FROM {self._prefix}ckpt_step s "
            f"JOIN {self._prefix}ckpt_workflow w ON w.id = s.workflow_id WHERE w.status = {p}",
            ("running",),
        )
        done: dict[str, set[str]] = {}
        for wf_id, step in steps:
            done.setdefault(wf_id, set()).add(step)
        for wf_id, fail_step in running:
            self._tasks[wf_id] = asyncio.create_task(
                self._run(wf_id, fail_step, frozenset(done.get(wf_id, ())))
            )

    def _step_and_checkpoint(self, step: str, wf_id: str) -> None:
        self.services.perform(step, wf_id)
        p = self._param
        self._commit(
            f"INSERT INTO {self._prefix}ckpt_step(workflow_id, step) VALUES ({p}, {p})",
            (wf_id, step),
        )

    async def _run_step(self, step: str, wf_id: str, fail: bool) -> None:
        if fail:
            raise PaymentDeclined(f"payment of {wf_id} declined")
        await asyncio.to_thread(self._step_and_checkpoint, step, wf_id)

    async def _run(
        self, wf_id: str, fail_step: str | None, done_before: frozenset[str]
    ) -> dict[str, Any]:
        result = await run_saga(wf_id, fail_step, self._run_step, done_before)
        p = self._param
        await asyncio.to_thread(
            self._commit,
            f"UPDATE {self._prefix}ckpt_workflow SET status = {p}, result = {p} WHERE id = {p}",
            ("done", json.dumps(result), wf_id),
        )
        return result

    async def start(self, wf_id: str, fail_step: str | None) -> asyncio.Task[dict[str, Any]]:
        p = self._param
        await asyncio.to_thread(
            self._commit,
            f"INSERT INTO {self._prefix}ckpt_workflow(id, fail_step, status) "
            f"VALUES ({p}, {p}, {p}) ON CONFLICT (id) DO NOTHING",
            (wf_id, fail_step, "running"),
        )
        task = asyncio.create_task(self._run(wf_id, fail_step, frozenset()))
        self._tasks[wf_id] = task
        return task

    async def result(self, handle: asyncio.Task[dict[str, Any]]) -> dict[str, Any]:
        return await handle

    async def wait_all(self, ids: Sequence[str]) -> dict[str, Any]:
        async def one(wf_id: str) -> Any:
            task = self._tasks.get(wf_id)
            try:
                if task is not None:
                    return await task
                p = self._param
                rows = await asyncio.to_thread(
                    self._query,
                    f"SELECT status, result FROM {self._prefix}ckpt_workflow WHERE id = {p}",
                    (wf_id,),
                )
                if not rows or rows[0][0] != "done":
                    return f"not found or not done: {rows}"
                return json.loads(rows[0][1])
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"

        results = await asyncio.gather(*(one(i) for i in ids))
        return dict(zip(ids, results, strict=True))

    async def counts(self) -> dict[str, int] | None:
        rows = await asyncio.to_thread(
            self._query, f"SELECT status, count(*) FROM {self._prefix}ckpt_workflow GROUP BY status"
        )
        return {str(status): int(n) for status, n in rows}

    def describe(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "commits": "1 start + 1 per step (after its effect, same thread hop) + 1 end",
            "pool_size": self.pool_size,
        }
        if self.kind == "sqlite":
            record["db"] = "sqlite file, WAL, synchronous=NORMAL"
        else:
            record["db"] = f"postgresql schema {self.config['schema']} (autocommit statements)"
        return record

    async def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        if self._pool is not None:
            self._pool.close()
            self._pool = None
