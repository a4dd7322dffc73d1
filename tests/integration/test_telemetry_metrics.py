"""Prometheus metrics count exactly what a run did (SQLite, PostgreSQL, through a server).

200 sagas, some declined and compensated, some retried once, one suspended: the scrape shows
those counts and nothing more. Takeovers and lost leases are provoked through the store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import sagaway as sw
from sagaway import observe
from sagaway.store import open_store
from sagaway.store.records import Lease, NewWorkflow
from sagaway.telemetry import metrics

N = 200
JOB = "test_a_takeover_and_a_lost_lease_are_counted.job"  # a nested function's name


def declined(i: int) -> bool:
    return i % 20 == 7


def flaky(i: int) -> bool:
    return i % 25 == 3


BROKEN = 199  # raises a plain error: SUSPENDED, not compensated


class Declined(sw.CompletableError):
    """The card was declined."""


@pytest.fixture
def registry() -> Iterator[CollectorRegistry]:
    metrics.disable_metrics()
    fresh = metrics.enable_metrics(CollectorRegistry())
    try:
        yield fresh
    finally:
        metrics.disable_metrics()


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the scrape, by name and sorted labels (parsed from the text format, as
    Prometheus reads it)."""
    text = generate_latest(registry).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def build(manager: sw.Manager, retried: set[int]) -> Any:
    @manager.register_activity
    async def reserve(i: int) -> str:
        return f"r{i}"

    @manager.register_activity
    async def release(reservation: str) -> None:
        return None

    @manager.register_activity(retry=sw.RetryPolicy(initial_interval=0.01, maximum_attempts=3))
    async def charge(i: int) -> str:
        if i == BROKEN:
            raise RuntimeError("the payment service answered nonsense")
        if declined(i):
            raise Declined("card declined", code="DECLINED")
        if flaky(i) and i not in retried:
            retried.add(i)
            raise sw.RetryableError("timeout")
        return f"c{i}"

    @manager.register_workflow
    async def order(i: int) -> str:
        async with sw.Saga() as saga:
            reservation = await reserve(i)
            saga.add_compensation(release, reservation)
            return await charge(i)

    return order


async def test_a_scrape_shows_exactly_what_200_sagas_did(
    db_url: str, registry: CollectorRegistry
) -> None:
    manager = sw.Manager(db_url, poll_interval=0.05)
    order = build(manager, set())
    async with manager:
        handles = [
            await manager.workflow(order, i).execute(idempotency_key=f"order-{i}") for i in range(N)
        ]

        async def outcome(i: int, handle: sw.WorkflowHandle[Any]) -> None:
            if i == BROKEN:
                while (await handle.status()) is not sw.WorkflowStatus.SUSPENDED:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
                return
            with contextlib.suppress(Declined):
                await handle.result()

        await asyncio.wait_for(asyncio.gather(*(outcome(i, h) for i, h in enumerate(handles))), 60)
        await metrics.refresh_statuses(manager)

    n_declined = sum(declined(i) for i in range(N))
    n_flaky = sum(flaky(i) for i in range(N) if not declined(i) and i != BROKEN)
    completed = N - n_declined - 1
    found = samples(registry)
    assert value(found, "sagaway_workflows_started_total", workflow="build.order") == N
    ended = "sagaway_workflows_ended_total"
    assert value(found, ended, workflow="build.order", status="COMPLETED") == completed
    assert value(found, ended, workflow="build.order", status="FAILED") == n_declined
    assert value(found, ended, workflow="build.order", status="CANCELLED") == 0
    assert value(found, "sagaway_workflows_suspended_total", workflow="build.order") == 1

    attempts = "sagaway_activity_attempts_total"
    act = {"kind": "activity"}
    assert value(found, attempts, activity="build.reserve", outcome="completed", **act) == N
    assert value(found, attempts, activity="build.charge", outcome="completed", **act) == completed
    assert value(found, attempts, activity="build.charge", outcome="failed", **act) == n_declined
    assert value(found, attempts, activity="build.charge", outcome="retrying", **act) == n_flaky
    assert value(found, attempts, activity="build.charge", outcome="error", **act) == 1
    comp = {"kind": "compensation", "activity": "build.release"}
    assert value(found, attempts, outcome="completed", **comp) == n_declined
    assert value(found, "sagaway_compensations_total", activity="build.release") == n_declined
    # Every attempt has its latency observed, under the same labels.
    duration = "sagaway_activity_attempt_duration_seconds_count"
    assert value(found, duration, activity="build.charge", outcome="retrying", **act) == n_flaky
    assert value(found, duration, activity="build.reserve", outcome="completed", **act) == N

    gauge = "sagaway_workflows"
    assert value(found, gauge, status="COMPLETED") == completed
    assert value(found, gauge, status="FAILED") == n_declined
    assert value(found, gauge, status="SUSPENDED") == 1
    assert value(found, gauge, status="WAITING") == 0
    assert value(found, gauge, status="RUNNING") == 0
    assert value(found, "sagaway_recovery_takeovers_total", workflow="build.order") == 0
    assert value(found, "sagaway_lease_losses_total", workflow="build.order") == 0

    # The store's batched writes: what went to the database (or the server) in how many calls.
    sizes = {
        labels: v for (name, labels), v in found.items() if name == "sagaway_store_batch_size_sum"
    }
    counts = {
        labels: v
        for (name, labels), v in found.items()
        if name == "sagaway_store_write_duration_seconds_count"
    }
    assert sizes and set(sizes) == set(counts)
    assert sum(sizes.values()) >= sum(counts.values()) > 0


async def test_a_takeover_and_a_lost_lease_are_counted(
    db_url: str, registry: CollectorRegistry
) -> None:
    manager = sw.Manager(db_url, poll_interval=0.05)
    entered, go_on = asyncio.Event(), asyncio.Event()

    @manager.register_activity
    async def slow() -> str:
        entered.set()
        await go_on.wait()
        return "done"

    @manager.register_workflow
    async def job() -> str:
        return await slow()

    store = open_store(db_url)
    await store.open()
    try:
        # A process that died holding a lease (expired long ago): recovery takes it over.
        await store.create_workflow(
            NewWorkflow(run_id="dead-run", key="orphan", name=JOB, args="{}", args_hash="x"),
            now=1.0,
            lease=Lease("dead-token", "dead-process", 2.0),
            replace_live=False,
        )
        async with manager:
            await asyncio.wait_for(entered.wait(), 20)
            entered.clear()
            # Another process takes the lease of the running one (as if its clock ran past
            # the expiry): this process loses it when it writes the activity's outcome.
            running = await manager.get_workflow("orphan").describe()
            assert running.status is sw.WorkflowStatus.RUNNING
            far = 10_000_000_000.0
            [(taken, _)] = await store.claim_due(
                owner="thief", now=far, lease_timeout=30.0, limit=1, exclude=()
            )
            assert taken.previous_owner is not None and taken.previous_owner != "dead-process"
            go_on.set()
            found: dict[Any, float] = {}
            for _ in range(500):
                found = samples(registry)
                if value(found, "sagaway_lease_losses_total", workflow=JOB) >= 1:
                    break
                await asyncio.sleep(0.02)
    finally:
        await store.close()
    assert value(found, "sagaway_recovery_takeovers_total", workflow=JOB) == 1
    assert value(found, "sagaway_lease_losses_total", workflow=JOB) == 1
    assert value(found, "sagaway_workflows_ended_total", workflow=JOB, status="COMPLETED") == 0


def test_enabling_twice_keeps_one_registry(registry: CollectorRegistry) -> None:
    assert metrics.enable_metrics() is registry
    assert metrics.metrics_registry() is registry
    with pytest.raises(ValueError, match="another registry"):
        metrics.enable_metrics(CollectorRegistry())


class _Broken(observe.Observer):
    """Fails at every report and every span."""

    def workflow_started(self, name: str, key: str) -> None:
        raise RuntimeError("broken observer")

    def workflow_ended(self, name: str, key: str, status: str) -> None:
        raise RuntimeError("broken observer")

    def trace_context(self, name: str, key: str) -> str | None:
        raise RuntimeError("broken observer")

    def attempt(self, *args: Any, **kwargs: Any) -> observe.Span:
        return _BrokenSpan()

    def execution(self, *args: Any, **kwargs: Any) -> observe.Span:
        raise RuntimeError("broken observer")


class _BrokenSpan(observe.Span):
    def end(self, outcome: str, error: BaseException | None = None) -> None:
        raise RuntimeError("broken span")


async def test_a_failing_observer_changes_nothing_a_workflow_does(
    db_url: str, registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    broken = _Broken()
    observe.install(broken)
    try:
        manager = sw.Manager(db_url, poll_interval=0.05)
        order = build(manager, set())
        async with manager:
            assert await manager.workflow(order, 1).execute_get(idempotency_key="b1") == "c1"
    finally:
        observe.uninstall(broken)
    found = samples(registry)  # the other observer still got every report
    ended = "sagaway_workflows_ended_total"
    assert value(found, ended, workflow="build.order", status="COMPLETED") == 1
    assert "telemetry observer" in caplog.text
