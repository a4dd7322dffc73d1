"""PostgreSQL failures mid-run: the engine reconnects, loses nothing and keeps its promises.

Faults come from terminating our own backends or from a TCP proxy in front of the server
(tests/faults.py): the shared server itself is never stopped.
"""

from __future__ import annotations

import asyncio
import collections
import urllib.parse
import uuid

import psycopg
import pytest

import sagaway as sw
from tests.conftest import POSTGRES_URL
from tests.faults import PgProxy

N = 60


def _terminate(application_name: str) -> int:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            (application_name,),
        ).fetchall()
    return len(rows)


@pytest.mark.postgres
@pytest.mark.slow
async def test_backends_terminated_during_a_run(postgres_url: str) -> None:
    db_url = postgres_url
    app = f"sagaway-outage-{uuid.uuid4().hex[:8]}"
    manager = sw.Manager(f"{db_url}&application_name={app}", poll_interval=0.05, lease_timeout=3)
    effects: collections.Counter[str] = collections.Counter()
    thresholds = [40, 100, 160]
    gates = {threshold: asyncio.Event() for threshold in thresholds}
    reached = asyncio.Event()

    @manager.register_activity
    async def step(name: str) -> str:
        effects[sw.activity_info().idempotency_key] += 1
        # Explicit synchronisation: work pauses at each threshold until connections are dropped.
        for threshold in thresholds:
            if len(effects) >= threshold and not gates[threshold].is_set():
                reached.set()
                await gates[threshold].wait()
        return name

    @manager.register_activity
    async def undo(name: str) -> None:
        effects[sw.activity_info().idempotency_key] += 1

    @manager.register_workflow
    async def saga(i: int) -> str:
        async with sw.Saga() as s:
            for name in ("a", "b", "c"):
                await step(f"{name}{i}")
                s.add_compensation(undo, f"{name}{i}")
            if i % 5 == 0:
                raise sw.CompletableError("declined")
        return await step(f"d{i}")

    terminated = 0
    async with manager:
        handles = [
            await manager.workflow(saga, i).execute(idempotency_key=f"s{i}") for i in range(N)
        ]
        for threshold in thresholds:
            await asyncio.wait_for(reached.wait(), 30)
            reached.clear()
            terminated += await asyncio.to_thread(_terminate, app)
            gates[threshold].set()
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(h.result() for h in handles), return_exceptions=True), 120
        )
    assert terminated > 0, "the test did not drop any connection"
    for i, outcome in enumerate(outcomes):
        if i % 5 == 0:
            assert isinstance(outcome, sw.CompletableError), outcome
        else:
            assert outcome == f"d{i}"
    # Every effect recorded under its own idempotency key: 4 steps, or 3 steps + 3 undos.
    per_workflow = collections.Counter(key.split("/")[0] for key in effects)
    assert all(per_workflow[f"s{i}"] in (4, 6) for i in range(N))
    assert len(effects) == sum(6 if i % 5 == 0 else 4 for i in range(N))


def _schema(url: str) -> str:
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    return query["schema"][0]


def _signals(url: str) -> list[tuple[str, str | None]]:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        rows = conn.execute(
            psycopg.sql.SQL("SELECT payload, dedupe_id FROM {}.signals ORDER BY id").format(
                psycopg.sql.Identifier(_schema(url))
            )
        ).fetchall()
    return [(str(payload), dedupe_id) for payload, dedupe_id in rows]


@pytest.mark.postgres
async def test_a_send_whose_commit_acknowledgement_is_lost_reports_its_own_signal(
    postgres_url: str,
) -> None:
    """The retried insert meets the row its lost attempt committed: that is this send's signal,
    stored once, not a duplicate of an earlier send (issue 12, defect 14)."""
    async with PgProxy(postgres_url) as proxy:
        manager = sw.Manager(proxy.url(postgres_url))

        @manager.register_workflow
        async def waits() -> str:
            return str(await manager.signal("go").receive(str))

        # connect(): no workers, so the sends are the only transactions that COMMIT.
        async with manager.connect():
            handle = await manager.workflow(waits).execute(idempotency_key="w")

            lost = proxy.lose_next_commit_ack()
            assert await manager.signal("go").send("w", "a", dedupe_id="d1") is True
            assert lost.is_set(), "the acknowledgement was not lost: the test tested nothing"
            assert await manager.signal("go").send("w", "a", dedupe_id="d1") is False

            lost = proxy.lose_next_commit_ack()
            assert await manager.signal("go").send("w", "b") is True
            assert lost.is_set()
            assert await handle.status() is sw.WorkflowStatus.PENDING
    assert _signals(postgres_url) == [('"a"', "d1"), ('"b"', None)]


@pytest.mark.postgres
async def test_a_black_holed_listening_connection_is_noticed_at_its_next_probe(
    postgres_url: str,
) -> None:
    """A socket that swallows everything answers neither the probe's statement nor its cancel;
    the listener must not wait for their timeouts (40 s + 5 s) but give up at the probe's own
    (issue 12, defect 15)."""
    from sagaway.store.postgres import PostgresStore

    heard, deaf = asyncio.Event(), asyncio.Event()

    def on_notice(payload: str) -> None:
        if payload == "listening:":
            heard.set()
        elif payload == "deaf:":
            deaf.set()

    async with PgProxy(postgres_url) as proxy:
        store = PostgresStore(f"{proxy.url(postgres_url)}&probe_interval=0.5&probe_timeout=0.5")
        await store.open()
        try:
            await store.listen(on_notice)
            await asyncio.wait_for(heard.wait(), 10)
            heard.clear()
            proxy.blackhole()
            # Next probe within 0.5 s, given up 0.5 s later; the old wait was over 10 s.
            await asyncio.wait_for(deaf.wait(), 5)
            proxy.restore()
            await asyncio.wait_for(heard.wait(), 10)  # and it listens again
        finally:
            await store.close()


def test_timing_url_parameters_are_sagaways_own_and_checked() -> None:
    from sagaway.store.postgres import PostgresStore, Timing, parse_postgres_url

    url = "postgresql://u@h/db?pool_timeout=1.5&reconnect_delay=0.2&probe_interval=3"
    url += "&sslmode=require"
    assert parse_postgres_url(url)[0] == "postgresql://u@h/db?sslmode=require"
    timing = PostgresStore(url).timing
    assert (timing.pool_timeout, timing.reconnect_delay, timing.probe_interval) == (1.5, 0.2, 3.0)
    assert timing.probe_timeout == Timing().probe_timeout == 5.0
    for bad in ("0", "-1", "soon", "nan", "inf"):
        with pytest.raises(ValueError, match="pool_timeout must be a positive number of seconds"):
            PostgresStore(f"postgresql://u@h/db?pool_timeout={bad}")
