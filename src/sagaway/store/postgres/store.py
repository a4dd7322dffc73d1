"""PostgreSQL store: psycopg 3 async, a connection pool, row locks for fencing and claiming.

Every verb is one transaction on a pooled connection (single-statement verbs run as one
implicit transaction: one round trip). Many processes share one database:

- ``claim_due`` takes due executions with ``FOR UPDATE SKIP LOCKED``, so concurrent claimers get
  disjoint work and never wait for each other;
- fenced writes check the lease token and RUNNING status in the statement that writes (or under
  a row lock taken in the same transaction) and raise ``errors.LeaseLost`` otherwise;
- ``create_workflow`` relies on the partial unique index of current keys
  (``INSERT ... ON CONFLICT DO NOTHING``), so concurrent creates of one key make one row;
- durable waits cannot miss their wake-up: a receiver and a sender of a signal lock the
  execution's row before they look or write, and a parent share-locks its child's row before it
  decides to wait for it (locks are taken child first, then parent, as the child's end does).

Transient failures (``psycopg.OperationalError``: server restart, terminated backend, deadlock,
serialization failure) retry the whole transaction a few times. An attempt may have committed
although its acknowledgement was lost, so every verb is written to give the same answer when run
again: ``create_workflow`` recognises its own ``run_id``, ``claim_due`` reuses its lease tokens
and finds what the lost attempt took, ``send_signal`` finds its row by the sender token it chose
once, and the fenced/ending verbs recognise their own outcome.

Outages: statements fail with ``StoreUnavailable`` after ``pool_timeout`` seconds without a
connection, and the pool reconnects at most ``reconnect_delay`` seconds apart (``postgres.conn``);
the listening connection probes itself and reconnects (``postgres.listener``). Under load, starts,
run reads, steps and ends share statements (``postgres.batches``).

URL: ``postgresql://user:password@host:5432/db?schema=sagaway&pool_size=10`` plus any libpq
parameter; Sagaway's own parameters (schema, pool size, the ``Timing`` seconds) are described
and parsed in ``postgres.url``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from psycopg.rows import DictRow

from sagaway import errors
from sagaway.states import WorkflowStatus
from sagaway.store import _listing, _params, _rows
from sagaway.store._collaborators import Collaborators
from sagaway.store._group_commit import GroupCommit
from sagaway.store._sql_verbs import SQLVerbs
from sagaway.store.contract import CreateResult, Store
from sagaway.store.forwarding import derived
from sagaway.store.postgres import audit as _pg_audit
from sagaway.store.postgres import batches as _pg_batches
from sagaway.store.postgres import conn as _pg_conn
from sagaway.store.postgres import signals as _pg_signals
from sagaway.store.postgres.conn import Conn, exists, named
from sagaway.store.postgres.connection import Connection
from sagaway.store.postgres.fencing import fenced
from sagaway.store.postgres.url import Timing, parse_postgres_url
from sagaway.store.records import (
    AuditNote,
    CancelRequestRecord,
    Lease,
    ListQuery,
    StepRecord,
    WorkflowRecord,
)

if TYPE_CHECKING:
    from sagaway.store._fork import Fork

__all__ = ["PostgresStore", "Timing", "parse_postgres_url"]  # the last two: defined in ``url``


_Q = _pg_conn.Q
_STEP_BATCH = 200
"""Steps written by one statement at most."""
_CREATE_BATCH = 100
"""Starts written by one statement at most."""
_FINISH_BATCH = 100
"""Ends written by one statement at most."""
_READ_BATCH = 200
"""Executions read by one statement at most."""
_BATCHED_PAYLOAD = 64 * 1024
"""Payloads (arguments, results) larger than this are written alone, not in a shared batch."""


class PostgresStore(Connection, SQLVerbs, Collaborators):
    """Store in one schema of a PostgreSQL database (``create=False``: an existing Sagaway schema
    only, see ``open_store``)."""

    PACKAGE = "sagaway.store.postgres"

    def __init__(self, url: str, *, create: bool = True) -> None:
        super().__init__(url, create=create)
        Collaborators.__init__(self, self._run)
        # Group commit (see _group_commit): under load, the starts, steps and ends of many
        # workflows share statements.
        self._step_commits: GroupCommit[tuple[StepRecord, str], None] = GroupCommit(
            lambda batch: _pg_batches.write_steps(self._run, batch),
            name="record_steps",
            max_batch=_STEP_BATCH,
            unique=lambda item: _pg_batches.step_key(item[0]),
        )
        self._create_commits: GroupCommit[dict[str, Any], WorkflowRecord | None] = GroupCommit(
            lambda batch: _pg_batches.insert_workflows(self._run, batch),
            name="create_workflows",
            max_batch=_CREATE_BATCH,
        )
        self._finish_commits: GroupCommit[dict[str, Any], None] = GroupCommit(
            lambda batch: _pg_batches.finish_many(self._run, batch, ended_by=self._owner),
            name="finish_workflows",
            max_batch=_FINISH_BATCH,
            unique=lambda item: item["run_id"],
        )
        self._run_reads: GroupCommit[str, WorkflowRecord | None] = GroupCommit(
            lambda run_ids: _pg_batches.get_runs(self._run, run_ids),
            name="read_runs",
            max_batch=_READ_BATCH,
        )

    # ------------------------------------------------------------------ verbs

    async def _create_run(self, create: _params.Create) -> CreateResult:
        # The common case, a free key: one insert, shared with concurrent starts (an audited
        # start writes its entry in a transaction of its own, with the insert).
        # A start in a line or a burst locks its key first: never batched.
        if (
            create.audit is None
            and len(create.new.args) <= _BATCHED_PAYLOAD
            and create.new.ordering_key is None
            and create.new.debounce_key is None
        ):
            created = await self._create_commits.submit(create.params)
            if created is not None:
                return CreateResult(created, created=True)
        from sagaway.store.postgres import create as _pg_create  # here: a reader never starts

        return await self._run(lambda conn, retried: _pg_create.run(create, conn))

    async def _fork(self, fork: Fork) -> CreateResult | None:
        from sagaway.store.postgres import fork as _pg_fork  # here: a reader never forks

        return await _pg_fork.run_postgres(self._run, fork)

    async def get_run(self, run_id: str) -> WorkflowRecord | None:
        # Reads made at once (many clients waiting for results) share one statement.
        return await self._run_reads.submit(run_id)

    async def load_steps_many(self, run_ids: Collection[str]) -> dict[str, list[StepRecord]]:
        ids = list(run_ids)

        async def op(conn: Conn, retried: bool) -> dict[str, list[StepRecord]]:
            found: dict[str, list[StepRecord]] = {}
            for row in await named(conn, "load_steps_many", {"run_ids": ids}):
                step = _rows.step_from_row(row)
                found.setdefault(step.run_id, []).append(step)
            return found

        if not ids:
            return {}
        return await self._run(op, transaction=False)

    async def record_step(self, step: StepRecord, *, token: str) -> None:
        # Steps recorded while a batch is being written wait and go in the next one, written in
        # one statement: under load many workflows share a round trip (group commit).
        alone = len(step.result or "") + len(step.error or "") > _BATCHED_PAYLOAD
        await self._step_commits.submit((step, token), alone=alone)

    async def _finish(
        self, params: _params.Params, final_step: StepRecord | None, has_parent: bool
    ) -> None:
        run_id, now = params["run_id"], params["now"]
        step_params = _params.step(final_step) if final_step else None
        size = len(params["result"] or "") + len(params["error"] or "")
        if final_step is not None:
            size += len(final_step.result or "") + len(final_step.error or "")

        if not has_parent:
            # The usual end of a top-level workflow: its last step and its end in one statement,
            # shared with the ends of other workflows.
            if step_params is not None:
                params.update({f"step_{name}": value for name, value in step_params.items()})
            await self._finish_commits.submit(params, alone=size > _BATCHED_PAYLOAD)
            return

        async def op(conn: Conn, retried: bool) -> None:
            # A child's end also wakes its waiters (its parent first of all): one transaction.
            owned = {**params, "ended_by": self._owner}
            try:
                if not await fenced(conn, "finish_owned", owned, retried, done_as="finished_as"):
                    return  # the lost attempt committed (with its final step and wake-up)
            except errors.LeaseLost:
                raise await _pg_batches.finish_refused(conn, owned) from None
            if step_params is not None:
                await conn.execute(_Q["upsert_step"], step_params)
            await conn.execute(_Q["wake_waiters"], {"run_ids": [run_id], "now": now})

        await self._run(op)

    async def _suspend(self, params: _params.Params) -> None:
        async def op(conn: Conn, retried: bool) -> None:
            await fenced(conn, "suspend_owned", params, retried, done_as="suspended_as")

        await self._run(op, transaction=False)

    async def release_workflow(self, run_id: str, *, token: str, now: float) -> None:
        params = {"run_id": run_id, "token": token, "now": now}

        async def op(conn: Conn, retried: bool) -> None:
            await conn.execute(_Q["release_owned"], params)

        await self._run(op, transaction=False)

    async def renew_leases(self, tokens: Collection[str], *, expires_at: float) -> set[str]:
        token_list = list(tokens)
        if not token_list:
            return set()

        async def op(conn: Conn, retried: bool) -> set[str]:
            cur = await conn.execute(
                _Q["renew_leases"], {"tokens": token_list, "expires_at": expires_at}
            )
            return {row[0] for row in await cur.fetchall()}

        return await self._run(op, transaction=False)

    async def _claim(self, claim: _params.Claim) -> list[tuple[WorkflowRecord, Lease]]:
        from sagaway.store.postgres import claims as _pg_claims  # here: a reader never claims

        return await _pg_claims.claim_due(self._run, claim)

    async def _next_due(self, due: _params.Due) -> float | None:
        from sagaway.store.postgres import claims as _pg_claims

        return await _pg_claims.next_due(self._run, due)

    async def _end(self, params: _params.Params, audit: AuditNote | None) -> bool:
        run_id = params["run_id"]

        async def op(conn: Conn, retried: bool) -> bool:
            if (await conn.execute(_Q["end_by_request"], params)).rowcount != 1:
                return retried and await exists(conn, "ended_as", params)
            await conn.execute(_Q["wake_waiters"], {"run_ids": [run_id], "now": params["now"]})
            await _pg_audit.write(conn, audit, run_id=run_id)
            return True

        return await self._run(op)

    async def _request_cancel(self, values: _params.Params) -> bool:
        return await _pg_signals.request_cancel(self._run, **values)

    request_cancel = derived(Store.request_cancel, _request_cancel)

    async def cancel_requests(self, run_ids: Collection[str]) -> dict[str, str]:
        return await _pg_signals.cancel_requests(self._run, run_ids)

    async def list_cancel_requests(self, run_id: str) -> list[CancelRequestRecord]:
        return await _pg_signals.list_cancel_requests(self._run, run_id)

    async def retry_now(self, run_id: str, *, now: float, audit: AuditNote | None = None) -> bool:
        params = {"run_id": run_id, "now": now}

        async def op(conn: Conn, retried: bool) -> bool:
            if (await conn.execute(_Q["retry_now"], params)).rowcount == 1:
                await _pg_audit.write(conn, audit, run_id=run_id)
                return True
            return retried and await exists(conn, "retried_as", params)

        return await self._run(op, transaction=audit is not None)

    async def count_by_status(self) -> dict[WorkflowStatus, int]:
        async def op(conn: Conn, retried: bool) -> dict[WorkflowStatus, int]:
            cur = await conn.execute(_Q["count_by_status"])
            return _rows.readable_counts(await cur.fetchall())

        return await self._run(op, transaction=False)

    # ------------------------------------------------------------------ durable waits

    async def _send(self, send: _params.Send) -> tuple[WorkflowRecord | None, bool]:
        return await _pg_signals.send(self._run, send)

    async def _receive(self, receive: _params.Receive) -> str | None:
        from sagaway.store.postgres import waits as _pg_waits  # here: a reader never waits

        return await _pg_waits.receive(self._run, receive)

    async def _wait(self, params: _params.Params, step: _params.Params | None) -> None:
        async def op(conn: Conn, retried: bool) -> None:
            if not await fenced(conn, "wait_owned", params, retried, done_as="waiting_as"):
                return  # the lost attempt started the wait
            if step is not None:
                await conn.execute(_Q["upsert_step"], step)

        await self._run(op, transaction=step is not None)

    async def _wait_for_child(self, values: _params.Params) -> WorkflowRecord | None:
        from sagaway.store.postgres import waits as _pg_waits

        return await _pg_waits.wait_for_child(self._run, **values)

    wait_for_child = derived(Store.wait_for_child, _wait_for_child)

    async def _purge_ended(self, values: _params.Params) -> list[str]:
        from sagaway.store.postgres import purge as _pg_purge  # here: a reader never purges

        return await _pg_purge.purge(self._run, **values)

    purge_ended = derived(Store.purge_ended, _purge_ended)

    async def _count_purgeable(self, values: _params.Params) -> int:
        from sagaway.store.postgres import purge as _pg_purge

        return await _pg_purge.count(self._run, **values)

    count_purgeable = derived(Store.count_purgeable, _count_purgeable)

    async def list_page(self, query: ListQuery) -> list[WorkflowRecord]:
        text, params = _listing.page_query(_listing.POSTGRES, query)

        async def op(conn: Conn, retried: bool) -> list[WorkflowRecord]:
            return _rows.readable_workflows(await _pg_conn.dict_rows(conn, text, params))

        return await self._run(op, transaction=False)

    async def _read(self, query: str, params: _params.Params) -> list[DictRow]:
        async def op(conn: Conn, retried: bool) -> list[DictRow]:
            return await named(conn, query, params)

        return await self._run(op, transaction=False)
