"""absurd's side of the order-saga workload (``benchmarks/WORKLOAD.md`` §1, §5).

absurd (``absurd-sdk`` on PyPI) keeps everything in PostgreSQL: a queue is a set of tables
(``absurd.t_<queue>`` tasks, ``r_`` runs, ``c_`` checkpoints, ...) and stored functions
(``absurd.spawn_task``, ``claim_task``, ``set_task_checkpoint_state``, ``complete_run``...).
The SDK does not create them: its schema is ``sql/absurd.sql`` of the project, which the CLI
package ``absurdctl`` (also on PyPI) carries as ``absurdctl.BUNDLED_SCHEMA_SQL`` and installs with
``absurdctl init``. ``reset_database`` does the same from Python: the orchestrator drops and
recreates the database ``bench_absurd`` (the schema is always named ``absurd``, so it gets a
database of its own) and runs that SQL in it before every scenario; ``cleanup`` drops it.

The workflow is one task, ``order_saga``, an ``async def`` handler whose four steps are
``ctx.step(name, fn)`` (a checkpoint per step; ``fn`` is the side effect through
``Services.aperform``). absurd has no compensation construct and no non-retryable errors, so:

* ``charge_payment`` raises ``PaymentDeclined`` before its effect in scenario B; the handler
  catches it around the steps and runs the compensations of the completed steps as steps of
  their own (``release_stock``, ``cancel_order``), then returns the "compensated" result. A
  failing step is not checkpointed, so the decline is not recorded; it is decided again, the
  same way, if the task runs again.
* Retries are per *task*, not per step: any other exception fails the run, and absurd schedules
  a new run of the whole handler (``max_attempts=3``, ``retry_strategy`` exponential, 1 s, x2),
  which skips the checkpointed steps. A step that fails for good fails the task *without*
  compensation (the handler cannot tell its last attempt from the others through the public
  API); not exercised here, no step fails in these scenarios.

The workflow id is the spawn's ``idempotency_key`` (absurd's task id is a UUID it makes), so a
new process finds the task by key. Execution: ``WORKERS`` ``AsyncAbsurd`` workers in the
benchmark process, each with its own connection (the SDK gives a client exactly one
connection, shared by all the tasks it runs), ``concurrency`` 25 each (100 in flight, the
clients' C), ``claim_timeout`` 5 s (Sagaway's lease), ``poll_interval`` 0.05 s when the queue is
empty (the SDK's default is 0.25 s; absurd has no wake-up on spawn). Results: the SDK's
``await_task_result``, which polls ``absurd.get_task_result`` from a client connection,
backing off from 50 ms to 1 s (it has no notification either). Connections: 1 client + 4
workers, and the services' pools.

Recovery (scenario C, phase 2): new workers claim the killed process's runs once their claim
has expired (``claim_task`` fails an expired run and schedules the next attempt) and rerun the
handler, which skips the checkpointed steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from importlib import metadata
from typing import Any

from benchmarks import workload
from benchmarks.workload import Services

DATABASE = "bench_absurd"
"""absurd's database for the default benchmark database ``bench`` (``database_for``)."""
QUEUE = "bench"
WORKERS = 4
CONCURRENCY = 25
CLAIM_TIMEOUT = 5
POLL_INTERVAL = 0.05
RETRY_STRATEGY = {
    "kind": "exponential",
    "base_seconds": workload.RETRY_INITIAL_INTERVAL,
    "factor": workload.RETRY_BACKOFF_COEFFICIENT,
}


class PaymentDeclined(Exception):
    """The payment was declined: a business error, caught by the handler (no retry)."""


def database_for(bench_db: str) -> str:
    """absurd's database beside the benchmark's: ``bench`` -> ``bench_absurd``."""
    return f"{bench_db}_absurd"


def _dbname(url: str) -> str:
    return urllib.parse.urlsplit(url).path.lstrip("/")


def reset_database(admin_url: str, url: str) -> None:
    """Drop and recreate the database of ``url`` (via ``admin_url``), then install absurd's
    schema (``absurdctl.BUNDLED_SCHEMA_SQL``) and the queue in it."""
    import psycopg
    from absurdctl import BUNDLED_SCHEMA_SQL
    from psycopg import sql

    name = _dbname(url)
    drop(admin_url, name)
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(BUNDLED_SCHEMA_SQL)  # no parameters: several statements in one go
        conn.execute("SELECT absurd.create_queue(%s)", (QUEUE,))


def drop(admin_url: str, name: str = DATABASE) -> None:
    """``DROP DATABASE IF EXISTS <name> WITH (FORCE)`` (default ``bench_absurd``)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _handler(services: Services) -> Callable[[Any, Any], Awaitable[dict[str, Any]]]:
    async def order_saga(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
        wf_id, fail_step = params["wf_id"], params["fail_step"]

        async def step(name: str, fail: bool = False) -> None:
            async def effect() -> None:
                if fail:
                    raise PaymentDeclined(f"payment of {wf_id} declined")
                await services.aperform(name, wf_id)

            await ctx.step(name, effect)

        done: list[str] = []
        current = workload.STEPS[0]
        try:
            for current in workload.STEPS:
                await step(current, current == workload.FAIL_STEP and fail_step == current)
                done.append(current)
        except PaymentDeclined:
            compensated = []
            for completed in reversed(done):
                compensation = workload.COMPENSATION_OF.get(completed)
                if compensation is not None:
                    await step(compensation)
                    compensated.append(compensation)
            return {"status": "compensated", "failed_step": current, "compensated": compensated}
        return {"status": "completed", "steps": done}

    return order_saga


class AbsurdAdapter:
    """Spawn with the workflow id as idempotency key; ``WORKERS`` workers in this process."""

    name = "absurd"

    def __init__(self, config: dict[str, Any], services: Services) -> None:
        self.url: str = config["url"]
        self.services = services
        self.workers_n = int(config.get("workers", WORKERS))
        self.client: Any = None
        self.workers: list[Any] = []
        self._conns: list[Any] = []
        self._loops: list[asyncio.Task[None]] = []

    async def _new(self) -> Any:
        """An ``AsyncAbsurd`` on a connection of its own, opened here. Given a URL, the SDK
        opens its connection on first use, unguarded: concurrent first calls (200 spawns at
        once) each opened one, and PostgreSQL ran out of connections."""
        import psycopg
        from absurd_sdk import AsyncAbsurd

        conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        self._conns.append(conn)
        app = AsyncAbsurd(conn, queue_name=QUEUE)
        app.register_task(name="order_saga")(_handler(self.services))
        return app

    async def open(self, recover: bool = False) -> None:
        self.client = await self._new()
        self.workers = [await self._new() for _ in range(self.workers_n)]
        pid = os.getpid()
        self._loops = [
            asyncio.create_task(
                worker.start_worker(
                    worker_id=f"bench-{pid}-{i}",
                    claim_timeout=CLAIM_TIMEOUT,
                    concurrency=CONCURRENCY,
                    poll_interval=POLL_INTERVAL,
                )
            )
            for i, worker in enumerate(self.workers)
        ]

    async def start(self, wf_id: str, fail_step: str | None) -> str:
        spawned = await self.client.spawn(
            "order_saga",
            {"wf_id": wf_id, "fail_step": fail_step},
            max_attempts=workload.RETRY_MAXIMUM_ATTEMPTS,
            retry_strategy=RETRY_STRATEGY,  # type: ignore[arg-type]
            idempotency_key=wf_id,
        )
        return str(spawned["task_id"])

    async def result(self, handle: str) -> dict[str, Any]:
        snapshot = await self.client.await_task_result(handle)
        if snapshot.state != "completed":
            raise RuntimeError(f"task {handle} {snapshot.state}: {snapshot.failure}")
        result: dict[str, Any] = snapshot.result  # type: ignore[assignment]
        return result

    async def _task_ids(self, ids: Sequence[str]) -> dict[str, str]:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            cur = await conn.execute(
                f"SELECT idempotency_key, task_id FROM absurd.t_{QUEUE} "
                "WHERE idempotency_key = ANY(%s)",
                (list(ids),),
            )
            return {str(k): str(t) for k, t in await cur.fetchall()}

    async def wait_all(self, ids: Sequence[str]) -> dict[str, Any]:
        found = await self._task_ids(ids)

        async def one(wf_id: str) -> Any:
            if wf_id not in found:
                return "not found"
            try:
                return await self.result(found[wf_id])
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"

        results = await asyncio.gather(*(one(i) for i in ids))
        return dict(zip(ids, results, strict=True))

    async def counts(self) -> dict[str, int] | None:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            cur = await conn.execute(f"SELECT state, count(*) FROM absurd.t_{QUEUE} GROUP BY state")
            return {str(state): int(n) for state, n in await cur.fetchall()}

    def describe(self) -> dict[str, Any]:
        return {
            "version": metadata.version("absurd-sdk"),
            "schema": f"absurdctl {metadata.version('absurdctl')} BUNDLED_SCHEMA_SQL "
            f"in database {DATABASE}, queue {QUEUE!r} (unpartitioned)",
            "workers": f"{self.workers_n} AsyncAbsurd workers, one connection each, "
            f"concurrency {CONCURRENCY}, claim_timeout {CLAIM_TIMEOUT} s, "
            f"poll_interval {POLL_INTERVAL} s",
            "client": "1 AsyncAbsurd (one connection): spawn(idempotency_key=wf_id), "
            "await_task_result (polls, 50 ms doubling to 1 s)",
            "retries": "per task: max_attempts 3, exponential 1 s x2",
            "saga": "handler catches PaymentDeclined and runs compensations as steps",
        }

    async def close(self) -> None:
        for worker in self.workers:
            worker.stop_worker()
        for loop in self._loops:
            loop.cancel()
        if self._loops:
            await asyncio.gather(*self._loops, return_exceptions=True)
        for conn in self._conns:
            with contextlib.suppress(Exception):
                await conn.close()
        self._conns.clear()
