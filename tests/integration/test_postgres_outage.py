"""PostgreSQL failures mid-run: the engine reconnects, loses nothing and keeps its promises.

Faults come from terminating our own backends or from a TCP proxy in front of the server
(tests/faults.py): the shared server itself is never stopped.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import urllib.parse
import uuid

import psycopg
import pytest

import sagaway as sw
from sagaway.store import notices
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
    stored once, not a duplicate of an earlier send."""
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
    the listener must not wait for their timeouts (40 s + 5 s) but give up at the probe's own."""
    from sagaway.store.postgres import PostgresStore

    heard, deaf = asyncio.Event(), asyncio.Event()

    def on_notice(notice: notices.Notice) -> None:
        if notice == notices.Listening():
            heard.set()
        elif notice == notices.Deaf():
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


class _LogEvent(logging.Handler):
    """Sets an event when a record with the given ``action`` is logged (same thread)."""

    def __init__(self, action: str) -> None:
        super().__init__()
        self.action = action
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "action", None) == self.action:
            self.seen.set()


@pytest.mark.postgres
@pytest.mark.parametrize("handle_from", ["execute", "get_workflow"])
async def test_result_keeps_waiting_through_an_outage(postgres_url: str, handle_from: str) -> None:
    """A client's result() outlives a database outage longer than its statements wait for a
    connection, and returns once the workflow ends: from the handle ``execute()`` returned (it
    waits for the end), and from ``get_workflow(key)`` (it reads the record first, during the
    outage)."""
    entered, gate = asyncio.Event(), asyncio.Event()
    read_failed = _LogEvent("wait_unavailable")
    log = logging.getLogger(
        "sagaway._engine.outages"  # both ways: the client's outage, logged where it is timed
    )
    log.addHandler(read_failed)

    def define(manager: sw.Manager) -> None:
        @manager.register_activity(name="gated")
        async def gated(x: int) -> int:
            entered.set()
            await gate.wait()
            return 2 * x

        @manager.register_workflow(name="flow")
        async def flow(x: int) -> int:
            return await gated(x)

    try:
        async with PgProxy(postgres_url) as proxy:
            # Only the client goes through the proxy; the worker's connection stays up.
            client = sw.Manager(
                f"{proxy.url(postgres_url)}&pool_timeout=0.3&reconnect_delay=0.1",
                poll_interval=0.1,
            )
            worker = sw.Manager(postgres_url, poll_interval=0.1)
            define(client)
            define(worker)
            async with worker, client.connect():
                handle = await client.workflow("flow", 21).execute(idempotency_key="r")
                await asyncio.wait_for(entered.wait(), 10)
                if handle_from == "execute":
                    result = asyncio.ensure_future(handle.result(timeout=60))
                    proxy.outage()
                else:
                    proxy.outage()
                    result = asyncio.ensure_future(client.get_workflow("r").result(timeout=60))
                # Until a read has failed for want of a connection (or result() gave up).
                seen = asyncio.ensure_future(read_failed.seen.wait())
                await asyncio.wait({result, seen}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
                seen.cancel()
                assert not result.done(), f"result() ended during the outage: {result!r}"
                assert read_failed.seen.is_set()
                proxy.restore()
                gate.set()
                assert await asyncio.wait_for(result, 30) == 42
    finally:
        log.removeHandler(read_failed)


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.long
async def test_an_idle_worker_runs_new_work_soon_after_an_outage(postgres_url: str) -> None:
    """Reconnection attempts stay at most reconnect_delay apart however long the outage: the
    pool's own backoff doubles them (about 1, 3, 7, 15 s after the first failure), so work
    stalled after the database was back for about as long as it had been down."""

    def define(manager: sw.Manager) -> None:
        @manager.register_workflow(name="quick")
        async def quick(x: int) -> int:
            return x + 1

    async with PgProxy(postgres_url) as proxy:
        # pool_size=1: one chain of reconnection attempts, so their times are known.
        worker = sw.Manager(
            f"{proxy.url(postgres_url)}&pool_size=1&pool_timeout=1&reconnect_delay=0.2",
            poll_interval=0.2,
        )
        client = sw.Manager(postgres_url, poll_interval=0.1)
        define(worker)
        define(client)
        async with worker, client.connect():
            assert await client.workflow("quick", 1).execute_get(timeout=10) == 2
            proxy.outage()
            await asyncio.wait_for(proxy.refusal.wait(), 10)  # the worker found it out
            # The fault is an outage of this length, not a race: a doubling backoff would make
            # its next attempt at least 13.5 s after the first failure (jitter included).
            await asyncio.sleep(9.5)
            proxy.restore()
            handle = await client.workflow("quick", 2).execute()
            # The client is not behind the proxy: only the worker's reconnection can be slow.
            assert await asyncio.wait_for(handle.result(), 2.5) == 3


@pytest.mark.postgres
async def test_an_engine_error_caught_by_workflow_code_cannot_complete_the_run(
    postgres_url: str,
) -> None:
    """Writing a retry's RETRYING step fails for want of a database; workflow code catching
    ``Exception`` sees that error, but the run is doomed: it must not complete on its fallback,
    and resumes from its last record, where the activity is retried."""
    entered, outage_on, caught, restored = (asyncio.Event() for _ in range(4))
    calls = 0
    async with PgProxy(postgres_url) as proxy:
        manager = sw.Manager(
            f"{proxy.url(postgres_url)}&pool_timeout=0.3&reconnect_delay=0.1",
            poll_interval=0.1,
            recovery_interval=0.2,
            lease_timeout=2,  # if even the suspension cannot be written, the lease lapses soon
        )

        @manager.register_activity(retry=sw.RetryPolicy(initial_interval=0.01, maximum_attempts=5))
        async def flaky() -> str:
            nonlocal calls
            calls += 1
            if calls == 1:
                entered.set()
                await outage_on.wait()
                raise sw.RetryableError("try again")
            return "charged"

        @manager.register_workflow
        async def pay() -> str:
            try:
                return await flaky()
            except Exception:
                caught.set()
                await restored.wait()  # the database is back before the workflow goes on
                return "fallback"

        async with manager:
            handle = await manager.workflow(pay).execute(idempotency_key="pay-1")
            await asyncio.wait_for(entered.wait(), 10)
            proxy.outage()
            outage_on.set()
            await asyncio.wait_for(caught.wait(), 30)
            proxy.restore()
            restored.set()
            assert await asyncio.wait_for(handle.result(), 30) == "charged"
            assert calls == 2
