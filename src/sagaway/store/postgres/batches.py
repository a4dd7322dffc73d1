"""The group-commit writers of the PostgreSQL store (see ``_group_commit``).

Under load the starts, run reads, steps and ends of many workflows share one statement each.
Every writer takes the store's ``run`` and a batch, and returns per item, in order, its
outcome or the error to raise for it. A batch's single JSON parameter refuses NaN/Infinity
(``json_batch``): that batch fails, and its items are written again one by one.
"""

from __future__ import annotations

from sagaway import errors
from sagaway.store import _params, _rows
from sagaway.store.contract import CancelPending
from sagaway.store.postgres.conn import Conn, Op, Params, Q, Run, exists, json_batch, named
from sagaway.store.records import StepRecord, WorkflowRecord


async def insert_workflows(
    run: Run, batch: list[Params]
) -> list[WorkflowRecord | BaseException | None]:
    """Starts (``_params.create``): the record of each inserted, None for a key taken."""

    async def op(conn: Conn, retried: bool) -> dict[str, WorkflowRecord]:
        if retried:
            return {}  # the slow path recognises what the lost attempt inserted
        if len(batch) == 1:
            rows = await named(conn, "insert_workflow", batch[0])
        else:
            # In key order: two processes inserting overlapping keys wait on each other in
            # the same order, never in a cycle.
            ordered = sorted(batch, key=lambda params: str(params["key"]))
            rows = await named(conn, "insert_workflows", {"batch": json_batch(ordered)})
        records = [_rows.workflow_from_row(row) for row in rows]
        return {record.run_id: record for record in records}

    inserted = await run(op, transaction=False)
    return [inserted.get(params["run_id"]) for params in batch]


async def get_runs(run: Run, run_ids: list[str]) -> list[WorkflowRecord | BaseException | None]:
    """Run reads: each record, None if missing, ``CorruptRecord`` for that reader alone."""

    async def op(conn: Conn, retried: bool) -> dict[str, WorkflowRecord | BaseException]:
        if len(run_ids) == 1:
            rows = await named(conn, "get_run", {"run_id": run_ids[0]})
        else:
            rows = await named(conn, "get_runs", {"run_ids": run_ids})
        found: dict[str, WorkflowRecord | BaseException] = {}
        for row in rows:
            try:
                found[row["run_id"]] = _rows.workflow_from_row(row)
            except errors.CorruptRecord as exc:
                found[row["run_id"]] = exc  # this reader's error only, not the whole batch's
        return found

    found = await run(op, transaction=False)
    return [found.get(run_id) for run_id in run_ids]


def step_key(step: StepRecord) -> tuple[str, str]:
    """The row a step writes: two writes of one row never share a batch."""
    return step.run_id, step.call_id


async def write_steps(run: Run, batch: list[tuple[StepRecord, str]]) -> list[BaseException | None]:
    """Fenced step writes (step, lease token): ``LeaseLost`` for those the token no longer owns."""
    written = await run(_steps_op(batch), transaction=False)
    return [
        None if step_key(step) in written else errors.LeaseLost(step.run_id) for step, _ in batch
    ]


def _steps_op(batch: list[tuple[StepRecord, str]]) -> Op[set[tuple[str, str]]]:
    query: str
    if len(batch) == 1:
        step, token = batch[0]
        query, params = "record_step_owned", _params.step(step)
        params["token"] = token
    else:
        rows = []
        for step, token in batch:
            row = _params.step(step)
            row["token"] = token
            rows.append(row)
        query, params = "record_steps_owned", {"batch": json_batch(rows)}

    async def op(conn: Conn, retried: bool) -> set[tuple[str, str]]:
        # Idempotent: a retry after a lost acknowledgement writes the same rows again (recording
        # a step does not give the lease up).
        cur = await conn.execute(Q[query], params)
        return {(row[0], row[1]) for row in await cur.fetchall()}

    return op


async def finish_many(
    run: Run, batch: list[Params], *, ended_by: str
) -> list[BaseException | None]:
    """Ends of top-level executions (``finish_owned``'s parameters, as ``SQLVerbs`` builds them,
    with ``step_*`` parameters for a final step): ``LeaseLost`` for those the token no longer
    owns. Whoever waits for one of them (a workflow that attached to it as its child) becomes
    due in the same transaction. ``ended_by``: the lease owner this store listens as, spared the
    notices of its own ends (once per statement, not in every item)."""

    if len(batch) == 1:
        params = {**batch[0], "ended_by": ended_by}
        query = "finish_owned_with_step" if "step_call_id" in params else "finish_owned"
    else:
        query = "finish_owned_many"
        params = {"batch": json_batch(batch), "ended_by": ended_by}
    wake = {"run_ids": [p["run_id"] for p in batch], "now": max(p["now"] for p in batch)}

    async def op(conn: Conn, retried: bool) -> set[str]:
        # The end and the wake of its waiters: one transaction of two statements (see
        # wake_waiters), sent in one round trip (conn.transaction() would wait for BEGIN
        # and COMMIT each). A failed statement leaves the transaction aborted; the pool rolls
        # back a connection returned inside one.
        async with conn.pipeline():
            await conn.execute(b"BEGIN")
            cur = await conn.execute(Q[query], params)
            await conn.execute(Q["wake_waiters"], wake)
            await conn.execute(b"COMMIT")
        if len(batch) == 1:
            ended = {batch[0]["run_id"]} if cur.rowcount == 1 else set()
        else:
            ended = {row[0] for row in await cur.fetchall()}
        if retried:
            for one in batch:
                if one["run_id"] not in ended and await exists(conn, "finished_as", one):
                    ended.add(one["run_id"])  # the lost attempt committed it (and its wake)
        return ended

    ended = await run(op, transaction=False)
    if len(ended) == len(batch):
        return [None] * len(batch)
    refused = [params for params in batch if params["run_id"] not in ended]

    async def why(conn: Conn, retried: bool) -> dict[str, BaseException]:
        return {params["run_id"]: await finish_refused(conn, params) for params in refused}

    reasons = await run(why, transaction=False)
    return [reasons.get(params["run_id"]) for params in batch]


async def finish_refused(conn: Conn, params: Params) -> BaseException:
    """Why the owned end ``params`` changed nothing: ``CancelPending`` if a cancel request it
    had not seen is recorded on the run it still owns, else ``LeaseLost``."""
    cur = await conn.execute(Q["cancel_pending"], params)
    row = await cur.fetchone()
    if row is not None:
        return CancelPending(params["run_id"], row[0])
    return errors.LeaseLost(params["run_id"])
