"""sayiir's side of the order-saga workload (``benchmarks/WORKLOAD.md`` §1, §5).

sayiir (PyPI ``sayiir``, a Rust core with Python bindings) checkpoints a workflow after each task
in PostgreSQL. Its workflows are static graphs built with ``Flow``: each task receives the
previous task's output, so the saga's state (``wf_id``, the steps done) travels from task to
task. The engine state is in the schema ``config["schema"]`` of the ``bench`` database
(``search_path`` set through the connection URL's ``options``; the orchestrator drops the schema
before every scenario, sayiir's migrations recreate its tables on open), with a pool of
``POOL_SIZE`` connections. One ``DurableEngine`` serves every run: engines built per call or per
thread opened connections of their own (hundreds at 100 in flight in a trial), the shared one
stays within its backend's pool.

How the saga is modelled, since sayiir has neither non-retryable errors nor compensations:

* The four steps are four ``@task``\\ s in sequence, each with ``RetryPolicy(max_retries=2,
  initial_delay_secs=1, backoff_multiplier=2)``: 3 attempts, 1 s then 2 s, as §1 asks for
  technical errors. Each task's only work is its side effect (``Services.perform``: sync tasks,
  which sayiir calls on the thread that runs the workflow).
* The declined payment is not an error (an error would be retried, then fail the workflow):
  ``charge_payment`` returns ``{"declined": true}`` without writing anything.
* The compensations are a conditional branch (``Flow.route``) on that output: ``charged`` runs
  ``arrange_shipping``, ``declined`` runs ``release_stock`` then ``cancel_order``. The last task
  of each branch returns §1's result; sayiir wraps a branch's output in ``{"branch": key,
  "result": ...}``, which ``result()`` unwraps. A step that failed for good after its retries
  would fail the workflow with no compensation: sayiir has no construct for that.

Execution: in this process, one ``DurableEngine`` whose ``run`` writes the instance's first
snapshot, runs every task and returns when the workflow ends. (``sayiir.run_durable_workflow``
does the same but builds a new engine per call: about 4 times slower at 100 in flight in a trial
here.) ``run`` takes the compiled workflow and its task registry (``Workflow._inner`` and
``_task_registry``, which is what ``run_durable_workflow`` passes too). It blocks its thread
(the GIL is released while sayiir waits on PostgreSQL), so each workflow runs on a thread of the
adapter's own pool (``THREADS``, more than the workflows ever in flight).

``start()`` hands the run to its thread and returns: sayiir has no durable start separate from
the run, whose first act is to write the instance's snapshot. (Waiting in ``start()`` for the
first task to begin would not be cheap either way: all the runs share the engine's Rust runtime,
and while one thread is inside a Python task the other runs' database I/O does not progress;
observed with sayiir 1.0, 1 of 40 runs reached its first task while one task was blocked.)

Scenario C is not run (``NO_RECOVERY``). sayiir recovers a killed process's workflows in two
ways, neither of which fits §3's rule that the recovering process finds the unfinished
workflows by itself:

* ``resume_workflow(workflow, instance_id, backend)`` (``DurableEngine.resume``) continues an
  instance from its last checkpoint (tried: it finishes this saga correctly), but only for ids
  the application supplies: sayiir has no call that lists unfinished instances, and the
  in-process engine takes no lease or claim that another process could see expire.
* A ``Worker`` polls the database for ``InProgress`` instances that no live worker has claimed,
  but sayiir 1.0's Worker did not run a workflow containing a ``Flow.route`` branch here: a
  submitted ``order_saga`` stayed ``InProgress`` without its first task running, and the
  instances of a killed phase 1 stayed parked at ``branch_0`` (a linear flow did run). And since
  ``DurableEngine.run`` takes no claim, a Worker next to live in-process runs takes them over and
  runs their steps a second time (observed), so it could only run in a recovery process anyway.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import urllib.parse
from collections.abc import Sequence
from importlib import metadata
from typing import Any

import sayiir

from benchmarks import workload
from benchmarks.workload import Services

POOL_SIZE = 10
"""sayiir's PostgreSQL connections (``PostgresBackend(max_connections=...)``), as Sagaway's pool."""

THREADS = 256
"""Threads running ``DurableEngine.run``: more than the workflows ever in flight (100)."""

NO_RECOVERY = (
    "sayiir 1.0 cannot find a killed process's workflows by itself for this saga: "
    "resume_workflow needs their ids from the application, and the Worker, which does find "
    "unclaimed InProgress instances, does not run workflows with a Flow.route branch"
)
"""Why scenario C is not run for sayiir (printed and recorded by ``benchmarks.compare``)."""

RETRY = sayiir.RetryPolicy(
    max_retries=workload.RETRY_MAXIMUM_ATTEMPTS - 1,
    initial_delay_secs=workload.RETRY_INITIAL_INTERVAL,
    backoff_multiplier=workload.RETRY_BACKOFF_COEFFICIENT,
)


def engine_url(url: str, schema: str, extension_schema: str | None = None) -> str:
    """``url`` with ``options=-c search_path=<schema>,public``: sayiir's tables go in ``schema``.

    ``public`` stays visible for an extension installed there (sayiir's migrations use
    pgcrypto's ``digest``, and install pgcrypto in ``schema`` when the database has none);
    ``extension_schema``: where the database already has pgcrypto, if elsewhere (its
    ``CREATE EXTENSION IF NOT EXISTS`` then installs nothing, and ``digest`` must be found).
    """
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query)
    path = [schema, "public"] + ([extension_schema] if extension_schema else [])
    query.append(("options", f"-c search_path={','.join(path)}"))
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def _unwrap(output: Any) -> Any:
    """A branch's output is ``{"branch": key, "result": value}``: the saga's result is value."""
    if isinstance(output, dict) and set(output) == {"branch", "result"}:
        return output["result"]
    return output


def build(services: Services) -> sayiir.Workflow:
    """The order saga as a sayiir workflow (one ``Flow``, a conditional branch at the end)."""

    def effect(step: str, state: dict[str, Any]) -> None:
        services.perform(step, state["wf_id"])

    @sayiir.task("create_order", retries=RETRY)
    def create_order(state: dict[str, Any]) -> dict[str, Any]:
        effect("create_order", state)
        return {**state, "steps": ["create_order"]}

    @sayiir.task("reserve_stock", retries=RETRY)
    def reserve_stock(state: dict[str, Any]) -> dict[str, Any]:
        effect("reserve_stock", state)
        return {**state, "steps": [*state["steps"], "reserve_stock"]}

    @sayiir.task("charge_payment", retries=RETRY)
    def charge_payment(state: dict[str, Any]) -> dict[str, Any]:
        if state["fail_step"] == "charge_payment":
            return {**state, "declined": True}  # a business outcome, not an error: no retry
        effect("charge_payment", state)
        return {**state, "steps": [*state["steps"], "charge_payment"], "declined": False}

    def payment_outcome(state: dict[str, Any]) -> str:
        return "declined" if state["declined"] else "charged"

    @sayiir.task("arrange_shipping", retries=RETRY)
    def arrange_shipping(state: dict[str, Any]) -> dict[str, Any]:
        effect("arrange_shipping", state)
        return {"status": "completed", "steps": [*state["steps"], "arrange_shipping"]}

    # The compensations of the completed steps, newest first (reserve_stock, then create_order).
    @sayiir.task("release_stock", retries=RETRY)
    def release_stock(state: dict[str, Any]) -> dict[str, Any]:
        effect("release_stock", state)
        return {**state, "compensated": ["release_stock"]}

    @sayiir.task("cancel_order", retries=RETRY)
    def cancel_order(state: dict[str, Any]) -> dict[str, Any]:
        effect("cancel_order", state)
        return {
            "status": "compensated",
            "failed_step": "charge_payment",
            "compensated": [*state["compensated"], "cancel_order"],
        }

    return (
        sayiir.Flow("order_saga")
        .then(create_order)
        .then(reserve_stock)
        .then(charge_payment)
        .route(payment_outcome, keys=["charged", "declined"])
        .branch("charged", arrange_shipping)
        .branch("declined", release_stock, cancel_order)
        .done()
        .build()
    )


class SayiirAdapter:
    """Workflows run in this process, each on a thread of a pool; no recovery mode.

    ``config``: ``url`` (the bench database) and ``schema`` (sayiir's tables).
    """

    name = "sayiir"

    def __init__(self, config: dict[str, Any], services: Services) -> None:
        self.url: str = config["url"]
        self.schema: str = config["schema"]
        self.services = services
        self.workflow = build(services)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._backend: Any = None
        self._engine: Any = None

    def _create_schema(self) -> str | None:
        """Create the engine's schema; the schema of pgcrypto, if the database has it."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url, autocommit=True, connect_timeout=30) as conn:
            conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
            )
            row = conn.execute(
                "SELECT extnamespace::regnamespace::text FROM pg_extension"
                " WHERE extname = 'pgcrypto'"
            ).fetchone()
        return None if row is None else str(row[0])

    async def open(self, recover: bool = False) -> None:
        if recover:
            raise NotImplementedError(NO_RECOVERY)
        self._loop = asyncio.get_running_loop()
        self._pool = concurrent.futures.ThreadPoolExecutor(THREADS, thread_name_prefix="sayiir")
        extension_schema = await asyncio.to_thread(self._create_schema)
        # The backend runs sayiir's migrations when it connects.
        self._backend = await asyncio.to_thread(
            functools.partial(
                sayiir.PostgresBackend,
                engine_url(self.url, self.schema, extension_schema),
                max_connections=POOL_SIZE,
            )
        )
        self._engine = sayiir.DurableEngine(self._backend)

    def _run(self, wf_id: str, fail_step: str | None) -> Any:
        state = {"wf_id": wf_id, "fail_step": fail_step}
        wf = self.workflow
        return self._engine.run(wf._inner, wf_id, state, wf._task_registry)

    async def start(self, wf_id: str, fail_step: str | None) -> asyncio.Future[Any]:
        assert self._loop is not None and self._pool is not None, "not open"
        return self._loop.run_in_executor(self._pool, self._run, wf_id, fail_step)

    async def result(self, handle: asyncio.Future[Any]) -> dict[str, Any]:
        status = await handle
        if not status.is_completed():
            raise RuntimeError(f"sayiir workflow ended {status.status}: {status.error}")
        result: dict[str, Any] = _unwrap(status.output)
        return result

    async def wait_all(self, ids: Sequence[str]) -> dict[str, Any]:
        """Scenario C's phase 2, which this adapter cannot do (see ``NO_RECOVERY``)."""
        raise NotImplementedError(NO_RECOVERY)

    def _count(self) -> dict[str, int]:
        import psycopg
        from psycopg import sql

        query = sql.SQL("SELECT status, count(*) FROM {}.sayiir_workflow_snapshots GROUP BY status")
        with psycopg.connect(self.url, autocommit=True, connect_timeout=30) as conn:
            rows = conn.execute(query.format(sql.Identifier(self.schema))).fetchall()
        return {str(status): int(n) for status, n in rows}

    async def counts(self) -> dict[str, int]:
        """Workflows per status, read from sayiir's snapshot table."""
        return await asyncio.to_thread(self._count)

    def describe(self) -> dict[str, Any]:
        return {
            "version": metadata.version("sayiir"),
            "engine": "one DurableEngine in this process; each run() on a thread of its own",
            "threads": THREADS,
            "schema": self.schema,
            "connection_pool": f"PostgresBackend(max_connections={POOL_SIZE})",
            "task_retry": {
                "max_retries": RETRY.max_retries,
                "initial_delay_secs": RETRY.initial_delay_secs,
                "backoff_multiplier": RETRY.backoff_multiplier,
            },
            "activities": "sync def tasks (Services.perform) on the workflow's thread",
            "decline": 'charge_payment returns {"declined": true} (sayiir retries every error)',
            "compensation": "Flow.route on the decline: release_stock then cancel_order",
            "recovery": "scenario C not run: " + NO_RECOVERY,
        }

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self._engine = None
        self._backend = None
