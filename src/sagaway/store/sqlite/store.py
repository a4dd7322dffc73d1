"""SQLite store: the verbs of the ``Store`` contract, each a function of the connection run by
the writer (``writer``) in its group transaction. The verbs both dialects take in the same way
come from ``SQLVerbs``, which calls this store's hooks (``_create_run``, ``_finish`` ...);
schedules, audit, queue limits, pauses and outputs are collaborators given the writer's
``_call``, built on first use (``_collaborators``). What a reader never needs (fork, purge) is
imported by its verb, so that opening the store to read a page stays quick."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from sagaway import errors
from sagaway.states import WorkflowStatus
from sagaway.store import (
    _listing,
    _params,
    _rows,
)
from sagaway.store._collaborators import Collaborators
from sagaway.store._sql_verbs import SQLVerbs
from sagaway.store.contract import CancelPending, CreateResult, Store
from sagaway.store.forwarding import derived
from sagaway.store.records import (
    AuditNote,
    CancelRequestRecord,
    Lease,
    ListQuery,
    StepRecord,
    WorkflowRecord,
)
from sagaway.store.sql import queries
from sagaway.store.sqlite import claims as _sqlite_claims
from sagaway.store.sqlite import debounce as sqlite_debounce
from sagaway.store.sqlite import signals as _sqlite_signals
from sagaway.store.sqlite.audit import write as audit_entry
from sagaway.store.sqlite.writer import Writer

if TYPE_CHECKING:
    from sagaway.store._fork import Fork

_Q = queries("sqlite")


class SQLiteStore(Writer, SQLVerbs, Collaborators):
    """Store on one SQLite file (``create=False``: an existing Sagaway file only, see
    ``open_store``)."""

    PACKAGE = "sagaway.store.sqlite"

    def __init__(self, url: str, *, create: bool = True) -> None:
        super().__init__(url, create=create)
        Collaborators.__init__(self, self._call)

    async def server_time(self) -> float | None:
        """None: an SQLite file is used from one machine, whose clock every process shares."""
        return None

    async def listen(
        self, callback: Callable[..., object], *, owner: str | None = None, ends: bool = True
    ) -> None:
        """SQLite has no notifications: other processes' changes are seen by polling."""

    # ------------------------------------------------------------------ verbs

    async def _create_run(self, create: _params.Create) -> CreateResult:
        def op(conn: sqlite3.Connection) -> CreateResult:
            result = _create(conn, create)
            if result.created:
                audit_entry(conn, create.audit, run_id=create.new.run_id)
            return result

        return await self._call(op, alone=True)

    async def _fork(self, fork: Fork) -> CreateResult | None:
        from sagaway.store.sqlite import fork as sqlite_fork  # here: a reader never forks

        return await self._call(lambda conn: sqlite_fork.run(conn, fork))

    async def get_run(self, run_id: str) -> WorkflowRecord | None:
        def op(conn: sqlite3.Connection) -> WorkflowRecord | None:
            row = conn.execute(_Q["get_run"], {"run_id": run_id}).fetchone()
            return _rows.workflow_from_row(row) if row else None

        return await self._call(op)

    async def load_steps_many(self, run_ids: Collection[str]) -> dict[str, list[StepRecord]]:
        ids = json.dumps(list(run_ids))

        def op(conn: sqlite3.Connection) -> dict[str, list[StepRecord]]:
            found: dict[str, list[StepRecord]] = {}
            for row in conn.execute(_Q["load_steps_many"], {"run_ids": ids}):
                step = _rows.step_from_row(row)
                found.setdefault(step.run_id, []).append(step)
            return found

        return await self._call(op)

    async def record_step(self, step: StepRecord, *, token: str) -> None:
        params = {**_params.step(step), "token": token}

        def op(conn: sqlite3.Connection) -> None:
            if conn.execute(_Q["record_step_owned"], params).rowcount != 1:
                raise errors.LeaseLost(step.run_id)

        await self._call(op, alone=True)

    async def _finish(
        self, params: _params.Params, final_step: StepRecord | None, has_parent: bool
    ) -> None:
        run_id, now = params["run_id"], params["now"]
        step_params = _params.step(final_step) if final_step else None

        def op(conn: sqlite3.Connection) -> None:
            if conn.execute(_Q["finish_owned"], params).rowcount != 1:
                pending = conn.execute(_Q["cancel_pending"], params).fetchone()
                if pending is not None:
                    raise CancelPending(run_id, pending[0])
                raise errors.LeaseLost(run_id)
            if step_params is not None:
                conn.execute(_Q["upsert_step"], step_params)
            # Not only a parent: any workflow may have attached to this one as its child.
            conn.execute(_Q["wake_waiters"], {"run_id": run_id, "now": now})

        await self._call(op, alone=True)

    async def _suspend(self, params: _params.Params) -> None:
        await self._call(lambda conn: _fenced(conn, "suspend_owned", params))

    async def release_workflow(self, run_id: str, *, token: str, now: float) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(_Q["release_owned"], {"run_id": run_id, "token": token, "now": now})

        await self._call(op)

    async def renew_leases(self, tokens: Collection[str], *, expires_at: float) -> set[str]:
        tokens = list(tokens)

        def op(conn: sqlite3.Connection) -> set[str]:
            kept = set()
            for token in tokens:
                cur = conn.execute(_Q["renew_lease"], {"token": token, "expires_at": expires_at})
                if cur.rowcount == 1:
                    kept.add(token)
            return kept

        return await self._call(op)

    async def _claim(self, claim: _params.Claim) -> list[tuple[WorkflowRecord, Lease]]:
        return await self._call(lambda conn: _sqlite_claims.claim_due(conn, claim))

    async def _next_due(self, due: _params.Due) -> float | None:
        return await self._call(lambda conn: _sqlite_claims.next_due(conn, due))

    async def _end(self, params: _params.Params, audit: AuditNote | None) -> bool:
        run_id = params["run_id"]

        def op(conn: sqlite3.Connection) -> bool:
            if conn.execute(_Q["end_by_request"], params).rowcount != 1:
                return False
            conn.execute(_Q["wake_waiters"], {"run_id": run_id, "now": params["now"]})
            audit_entry(conn, audit, run_id=run_id)
            return True

        return await self._call(op)

    async def _request_cancel(self, values: _params.Params) -> bool:
        return await self._call(lambda conn: _sqlite_signals.request_cancel(conn, **values))

    request_cancel = derived(Store.request_cancel, _request_cancel)

    async def list_cancel_requests(self, run_id: str) -> list[CancelRequestRecord]:
        return await self._call(lambda conn: _sqlite_signals.list_cancel_requests(conn, run_id))

    async def cancel_requests(self, run_ids: Collection[str]) -> dict[str, str]:
        return await self._call(lambda conn: _sqlite_signals.cancel_requests(conn, run_ids))

    async def retry_now(self, run_id: str, *, now: float, audit: AuditNote | None = None) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            if conn.execute(_Q["retry_now"], {"run_id": run_id, "now": now}).rowcount != 1:
                return False
            audit_entry(conn, audit, run_id=run_id)
            return True

        return await self._call(op)

    async def count_by_status(self) -> dict[WorkflowStatus, int]:
        def op(conn: sqlite3.Connection) -> dict[WorkflowStatus, int]:
            rows = conn.execute(_Q["count_by_status"]).fetchall()
            return _rows.readable_counts(rows)

        return await self._call(op)

    # ------------------------------------------------------------ durable waits

    async def _send(self, send: _params.Send) -> tuple[WorkflowRecord | None, bool]:
        return await self._call(lambda conn: _sqlite_signals.send(conn, send))

    async def _receive(self, receive: _params.Receive) -> str | None:
        def op(conn: sqlite3.Connection) -> str | None:
            _check_owner(conn, receive.run_id, receive.token)
            pending = conn.execute(_Q["pending_signals"], receive.pending()).fetchall()
            payload, writes = receive.writes(pending)
            for query, params in writes:
                conn.execute(_Q[query], params)
            return payload

        return await self._call(op)

    async def _wait(self, params: _params.Params, step: _params.Params | None) -> None:
        def op(conn: sqlite3.Connection) -> None:
            _fenced(conn, "wait_owned", params)
            if step is not None:
                conn.execute(_Q["upsert_step"], step)

        await self._call(op)

    async def wait_for_child(
        self, run_id: str, *, token: str, child_key: str, wait: bool, now: float
    ) -> WorkflowRecord | None:
        def op(conn: sqlite3.Connection) -> WorkflowRecord | None:
            _check_owner(conn, run_id, token)
            row = conn.execute(_Q["get_current"], {"key": child_key}).fetchone()
            child = _rows.workflow_from_row(row) if row else None
            if child is not None and not child.status.ended and wait:
                waiting_for = _params.child_wait(child_key)
                conn.execute(
                    _Q["wait_owned"],
                    _params.wait(
                        run_id, token=token, waiting_for=waiting_for, next_run_at=None, now=now
                    ),
                )
            return child

        return await self._call(op)

    async def _purge_ended(self, values: _params.Params) -> list[str]:
        from sagaway.store.sqlite import purge as sqlite_purge  # here: a reader never purges

        return await sqlite_purge.purge(self._call, **values)

    purge_ended = derived(Store.purge_ended, _purge_ended)

    async def count_purgeable(
        self, *, before: float, statuses: Collection[WorkflowStatus] | None
    ) -> int:
        from sagaway.store import _purge
        from sagaway.store.sqlite import purge as sqlite_purge

        names = _purge.ended_statuses(statuses)
        return await self._call(
            lambda conn: sqlite_purge.count(conn, before=before, statuses=names)
        )

    async def list_page(self, query: ListQuery) -> list[WorkflowRecord]:
        text, params = _listing.page_query(_listing.SQLITE, query)

        def op(conn: sqlite3.Connection) -> list[WorkflowRecord]:
            return _rows.readable_workflows(conn.execute(text, params).fetchall())

        return await self._call(op)

    async def _read(self, query: str, params: _params.Params) -> list[sqlite3.Row]:
        return await self._call(lambda conn: conn.execute(_Q[query], params).fetchall())


def _create(conn: sqlite3.Connection, create: _params.Create) -> CreateResult:
    """``create_workflow``'s writes (see ``Store.create_workflow``)."""
    new, params = create.new, create.params
    if new.debounce_key is not None:
        folded = sqlite_debounce.fold(conn, create)
        if folded is not None:
            return folded
    inserted = conn.execute(_Q["insert_workflow"], params).fetchone()
    if inserted is not None:
        return CreateResult(_rows.workflow_from_row(inserted), created=True)
    existing = _get_current(conn, new.key)
    if existing.run_id == new.run_id:  # our own earlier attempt
        return CreateResult(existing, created=True)
    if not create.replace_live or existing.status.ended:
        return CreateResult(existing, created=False)
    conn.execute(
        _Q["supersede"], _params.supersede(existing.run_id, new_run_id=new.run_id, now=create.now)
    )
    replacing = conn.execute(_Q["insert_workflow"], params).fetchone()
    return CreateResult(
        _rows.workflow_from_row(replacing), created=True, replaced_run_id=existing.run_id
    )


def _get_current(conn: sqlite3.Connection, key: str) -> WorkflowRecord:
    row = conn.execute(_Q["get_current"], {"key": key}).fetchone()
    assert row is not None
    return _rows.workflow_from_row(row)


def _check_owner(conn: sqlite3.Connection, run_id: str, token: str) -> None:
    if conn.execute(_Q["check_owner"], {"run_id": run_id, "token": token}).fetchone() is None:
        raise errors.LeaseLost(run_id)


def _fenced(conn: sqlite3.Connection, query: str, params: dict[str, Any]) -> None:
    """A write fenced by the lease token: ``LeaseLost`` unless it changed the owned row."""
    if conn.execute(_Q[query], params).rowcount != 1:
        raise errors.LeaseLost(params["run_id"])
