"""Helpers of the Store contract tests (tests/integration/test_store_*.py and tests/migration):
records built with explicit times, as the engine passes them, and raw SQL on the test database
behind the store's back."""

from __future__ import annotations

import sqlite3
import urllib.parse
import uuid
from typing import Any

from sagaway.states import StepKind, StepStatus
from sagaway.store import Store
from sagaway.store.records import Lease, NewWorkflow, SignalReceive, StepRecord, WorkflowRecord
from tests.grpc_server import direct_url

T0 = 1_700_000_000.0
LEASE = 30.0


def new(key: str = "order-1", run_id: str | None = None, **kw: Any) -> NewWorkflow:
    return NewWorkflow(
        run_id=run_id or uuid.uuid4().hex,
        key=key,
        name=kw.pop("name", "place_order"),
        args=kw.pop("args", '{"order": 1}'),
        args_hash=kw.pop("args_hash", "h1"),
        parent_key=kw.pop("parent_key", None),
    )


def lease(owner: str = "worker-a", expires_at: float = T0 + LEASE) -> Lease:
    return Lease(uuid.uuid4().hex, owner, expires_at)


def step(
    run_id: str,
    call_id: str,
    started_at: float,
    *,
    status: StepStatus = StepStatus.COMPLETED,
    attempts: int = 1,
    result: str | None = '"ok"',
    error: str | None = None,
    ended_at: float | None = None,
    kind: StepKind = StepKind.ACTIVITY,
    name: str = "charge",
) -> StepRecord:
    return StepRecord(
        run_id=run_id,
        call_id=call_id,
        kind=kind,
        name=name,
        status=status,
        attempts=attempts,
        result=result,
        error=error,
        started_at=started_at,
        ended_at=ended_at,
    )


async def running(store: Store, key: str, *, now: float = T0, owner: str = "worker-a") -> Lease:
    """Create ``key`` RUNNING under a fresh lease that expires at now + LEASE."""
    held = lease(owner, now + LEASE)
    result = await store.create_workflow(new(key), now=now, lease=held, replace_live=False)
    assert result.created
    return held


async def run_of(store: Store, key: str) -> WorkflowRecord:
    record = await store.get_workflow(key)
    assert record is not None
    return record


def is_sqlite(db_url: str) -> bool:
    """Whether the database (behind a test server, for a ``grpc+…`` URL) is SQLite."""
    return direct_url(db_url).startswith("sqlite")


def pg_conninfo(db_url: str) -> tuple[str, str]:
    """(libpq connection string, schema) of a PostgreSQL store URL, to reach its tables
    behind the store's back."""
    parts = urllib.parse.urlsplit(direct_url(db_url))
    params = dict(urllib.parse.parse_qsl(parts.query))
    schema = params.pop("schema")
    for own in ("pooler", "listen_url"):  # Sagaway's own, not libpq's
        params.pop(own, None)
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(params))), schema


def raw_sql(db_url: str, statement: str) -> list[tuple[Any, ...]]:
    """Run one statement on the test database behind the store's back."""
    db_url = direct_url(db_url)
    if is_sqlite(db_url):
        lite = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        try:
            rows = lite.execute(statement).fetchall()
            lite.commit()
            return rows
        finally:
            lite.close()
    import psycopg
    from psycopg import sql

    conninfo, schema = pg_conninfo(db_url)
    with psycopg.connect(conninfo, autocommit=True) as conn, conn.transaction():
        # The path for this transaction only: behind a pooler in transaction mode the next
        # transaction may run on another server connection.
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        cur = conn.execute(statement.encode())
        return cur.fetchall() if cur.description else []


def accept_all(payload: str) -> str | None:
    return None


async def receive(
    store: Store,
    run_id: str,
    token: str,
    *,
    name: str = "approve",
    call_id: str = "c1",
    wait: bool = False,
    deadline: float | None = None,
    now: float = T0 + 3,
    accept: Any = accept_all,
) -> str | None:
    result: str | None = await store.receive_signal(
        SignalReceive(
            run_id=run_id,
            token=token,
            name=name,
            call_id=call_id,
            started_at=T0 + 2,
            deadline=deadline,
            wait=wait,
        ),
        accept=accept,
        now=now,
    )
    return result
