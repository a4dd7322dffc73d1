"""The Store contract on every backend (``db_url``: SQLite and PostgreSQL), part 2: recording
and loading steps, fencing by lease token, and finishing or suspending a workflow.

Times are explicit (``now``), as the engine passes them, so no test sleeps.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sagaway import errors
from sagaway.states import StepKind, StepStatus, WorkflowStatus
from sagaway.store import Store
from sagaway.store.records import Lease, StepRecord
from tests.store_helpers import LEASE, T0, lease, new, run_of, running, step

# ---------------------------------------------------------------------------- steps


async def test_record_step_upserts_and_load_steps_orders(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    other_lease = await running(store, "k2")
    other_run = (await run_of(store, "k2")).run_id

    await store.record_step(step(run_id, "c2", T0 + 2), token=held.token)
    await store.record_step(
        step(run_id, "c1", T0 + 1, status=StepStatus.RETRYING, result=None, error='"e"'),
        token=held.token,
    )
    await store.record_step(step(run_id, "c0b", T0 + 1.5), token=held.token)
    await store.record_step(step(run_id, "c0a", T0 + 1.5), token=held.token)
    await store.record_step(step(other_run, "c1", T0), token=other_lease.token)

    steps = await store.load_steps(run_id)
    assert [s.call_id for s in steps] == ["c1", "c0a", "c0b", "c2"]
    assert steps[0] == step(
        run_id, "c1", T0 + 1, status=StepStatus.RETRYING, result=None, error='"e"'
    )

    # Upsert: everything but started_at is replaced.
    final = step(
        run_id,
        "c1",
        T0 + 9,
        status=StepStatus.COMPLETED,
        attempts=2,
        result='"done"',
        error=None,
        ended_at=T0 + 3,
        kind=StepKind.COMPENSATION,
        name="refund",
    )
    await store.record_step(final, token=held.token)
    steps = await store.load_steps(run_id)
    assert [s.call_id for s in steps] == ["c1", "c0a", "c0b", "c2"]
    assert steps[0] == StepRecord(
        run_id=run_id,
        call_id="c1",
        kind=StepKind.COMPENSATION,
        name="refund",
        status=StepStatus.COMPLETED,
        attempts=2,
        result='"done"',
        error=None,
        started_at=T0 + 1,
        ended_at=T0 + 3,
    )
    assert [s.call_id for s in await store.load_steps(other_run)] == ["c1"]


# ---------------------------------------------------------------------------- fencing


async def test_load_steps_many_reads_each_execution_in_order(store: Store) -> None:
    runs = []
    for key in ("k1", "k2", "k3"):
        held = await running(store, key)
        runs.append(((await run_of(store, key)).run_id, held))
    (r1, l1), (r2, l2), (r3, _) = runs
    await store.record_step(step(r1, "2", T0 + 2), token=l1.token)
    await store.record_step(step(r1, "1", T0 + 1), token=l1.token)
    await store.record_step(step(r2, "1", T0 + 3, result='"two"'), token=l2.token)

    found = await store.load_steps_many([r1, r2, r3, "no-such-run"])
    assert set(found) == {r1, r2}  # no steps, no entry
    assert found[r1] == await store.load_steps(r1)
    assert [s.call_id for s in found[r1]] == ["1", "2"]
    assert [(s.call_id, s.result) for s in found[r2]] == [("1", '"two"')]
    assert await store.load_steps_many([]) == {}


async def test_fenced_writes_with_a_wrong_token_write_nothing(store: Store) -> None:
    await running(store, "k1")
    before = await run_of(store, "k1")
    run_id = before.run_id

    with pytest.raises(errors.LeaseLost, match=f"^lost ownership of run {run_id}$") as lost:
        await store.record_step(step(run_id, "c1", T0), token="not-the-token")
    assert lost.value.run_id == run_id
    with pytest.raises(errors.LeaseLost):
        await store.finish_workflow(
            run_id,
            token="not-the-token",
            status=WorkflowStatus.COMPLETED,
            result='"r"',
            error=None,
            now=T0 + 1,
            final_step=step(run_id, "final", T0 + 1),
        )
    with pytest.raises(errors.LeaseLost):
        await store.suspend_workflow(
            run_id, token="not-the-token", error='"e"', now=T0 + 1, next_run_at=T0 + 60
        )

    assert await store.load_steps(run_id) == []
    assert await store.get_run(run_id) == before


async def test_fenced_writes_need_a_running_execution(store: Store) -> None:
    pending = await store.create_workflow(new("k1"), now=T0, lease=None, replace_live=False)
    with pytest.raises(errors.LeaseLost):
        await store.record_step(step(pending.record.run_id, "c1", T0), token="any")
    with pytest.raises(errors.LeaseLost):
        await store.record_step(step("no-such-run", "c1", T0), token="any")
    with pytest.raises(errors.LeaseLost):
        await store.suspend_workflow(
            "no-such-run", token="any", error='"e"', now=T0, next_run_at=T0
        )
    with pytest.raises(errors.LeaseLost):
        await store.finish_workflow(
            "no-such-run",
            token="any",
            status=WorkflowStatus.COMPLETED,
            result=None,
            error=None,
            now=T0,
        )
    assert await store.load_steps(pending.record.run_id) == []


async def test_finish_unknown_run_with_final_step_is_lease_lost(store: Store) -> None:
    with pytest.raises(errors.LeaseLost):
        await store.finish_workflow(
            "no-such-run",
            token="any",
            status=WorkflowStatus.COMPLETED,
            result=None,
            error=None,
            now=T0,
            final_step=step("no-such-run", "final", T0),
        )


async def test_stale_token_after_takeover(store: Store, other: Store) -> None:
    stale = await running(store, "k1")  # expires at T0 + LEASE; the owner then stalls
    run_id = (await run_of(store, "k1")).run_id
    await store.record_step(step(run_id, "c1", T0 + 1), token=stale.token)

    [(record, fresh)] = await other.claim_due(
        owner="worker-b", now=T0 + LEASE, lease_timeout=LEASE, limit=10, exclude=()
    )
    assert record.run_id == run_id
    assert record.lease_owner == "worker-b"

    with pytest.raises(errors.LeaseLost):
        await store.record_step(step(run_id, "c2", T0 + 31), token=stale.token)
    with pytest.raises(errors.LeaseLost):
        await store.record_step(
            step(run_id, "c1", T0 + 31, result='"overwritten"'), token=stale.token
        )
    with pytest.raises(errors.LeaseLost):
        await store.suspend_workflow(
            run_id, token=stale.token, error='"e"', now=T0 + 31, next_run_at=T0 + 90
        )
    with pytest.raises(errors.LeaseLost):
        await store.finish_workflow(
            run_id,
            token=stale.token,
            status=WorkflowStatus.FAILED,
            result=None,
            error='"stale"',
            now=T0 + 31,
            final_step=step(run_id, "c9", T0 + 31),
        )
    steps = await store.load_steps(run_id)
    assert [(s.call_id, s.result) for s in steps] == [("c1", '"ok"')]
    current = await store.get_run(run_id)
    assert current == record

    # The new owner writes normally.
    await other.record_step(step(run_id, "c2", T0 + 32), token=fresh.token)
    assert [s.call_id for s in await store.load_steps(run_id)] == ["c1", "c2"]


async def test_concurrent_starts_and_ends_are_each_decided_alone(store: Store) -> None:
    """Starts and ends made at once (grouped where the store batches them) get the answer each
    would get alone: one execution per key, and only the owner ends a run."""
    wanted = [new(f"k{i}") for i in range(8)] + [new("k3"), new("k5")]
    leases = [lease() for _ in wanted]
    results = await asyncio.gather(
        *(
            store.create_workflow(w, now=T0, lease=held, replace_live=False)
            for w, held in zip(wanted, leases, strict=True)
        )
    )
    by_key: dict[str, list[Any]] = {}
    for w, held, result in zip(wanted, leases, results, strict=True):
        by_key.setdefault(w.key, []).append((w, held, result))
    owners: list[tuple[str, Lease]] = []
    for key, tries in by_key.items():
        assert sum(r.created for _, _, r in tries) == 1, key
        winner = next((w, held) for w, held, r in tries if r.created)
        assert all(r.record.run_id == winner[0].run_id for _, _, r in tries)
        assert (await run_of(store, key)).status is WorkflowStatus.RUNNING
        owners.append((winner[0].run_id, winner[1]))

    async def end(i: int, run_id: str, held: Lease) -> str:
        token = held.token if i % 2 else "stale-token"
        try:
            await store.finish_workflow(
                run_id,
                token=token,
                status=WorkflowStatus.COMPLETED,
                result=f'"done-{i}"',
                error=None,
                now=T0 + 1,
                final_step=step(run_id, "last", T0 + 0.5, result=f'"{i}"') if i % 4 else None,
                has_parent=False,
            )
        except errors.LeaseLost:
            return "lost"
        return "ended"

    outcomes = await asyncio.gather(*(end(i, r, h) for i, (r, h) in enumerate(owners)))
    for i, ((run_id, _), outcome) in enumerate(zip(owners, outcomes, strict=True)):
        record = await store.get_run(run_id)
        assert record is not None
        steps = await store.load_steps(run_id)
        if i % 2 == 0:
            assert outcome == "lost" and record.status is WorkflowStatus.RUNNING and steps == []
            continue
        assert outcome == "ended" and record.status is WorkflowStatus.COMPLETED
        assert record.result == f'"done-{i}"' and record.ended_at == T0 + 1
        assert [(s.call_id, s.result) for s in steps] == ([("last", f'"{i}"')] if i % 4 else [])


async def test_large_payloads_are_written_alone_and_fenced(store: Store) -> None:
    """Steps and ends whose payload is too large to share a batch take their own statement,
    with the same fencing."""
    big = '"' + "x" * 100_000 + '"'
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    with pytest.raises(errors.LeaseLost):
        await store.record_step(step(run_id, "c1", T0, result=big), token="stale-token")
    await store.record_step(step(run_id, "c1", T0, result=big), token=held.token)
    with pytest.raises(errors.LeaseLost):
        await store.finish_workflow(
            run_id,
            token="stale-token",
            status=WorkflowStatus.COMPLETED,
            result=big,
            error=None,
            now=T0 + 1,
            has_parent=False,
        )
    await store.finish_workflow(
        run_id,
        token=held.token,
        status=WorkflowStatus.COMPLETED,
        result=big,
        error=None,
        now=T0 + 1,
        final_step=step(run_id, "c2", T0 + 1, result=big),
        has_parent=False,
    )
    record = await store.get_run(run_id)
    assert record is not None and record.status is WorkflowStatus.COMPLETED
    assert record.result == big
    assert [(s.call_id, s.result) for s in await store.load_steps(run_id)] == [
        ("c1", big),
        ("c2", big),
    ]


async def test_concurrent_step_writes_keep_every_outcome_and_fence_each(store: Store) -> None:
    """Many steps written at once (grouped into shared statements where the store batches):
    each owned step lands exactly as given, each one with a stale token fails alone, and a
    repeated call id keeps its last write."""
    runs: list[tuple[str, str]] = []
    for i in range(12):
        held = await running(store, f"k{i}")
        runs.append(((await run_of(store, f"k{i}")).run_id, held.token))
    odd = '{"text": "quote \' backslash \\\\ unicode é ✓", "n": 1.5e-300}'

    async def write(run_id: str, token: str, call_id: str, result: str) -> str:
        try:
            await store.record_step(
                step(run_id, call_id, T0 + 0.125, result=result, ended_at=T0 + 0.25),
                token=token,
            )
        except errors.LeaseLost:
            return "lost"
        return "ok"

    writes = []
    for i, (run_id, token) in enumerate(runs):
        good = token if i % 3 else "stale-token"
        writes += [write(run_id, good, f"c{j}", f'"{i}-{j}"') for j in range(5)]
        writes.append(write(run_id, good, "c0", odd))  # the same call id again, last wins
    outcomes = await asyncio.gather(*writes)

    for i, (run_id, _) in enumerate(runs):
        mine = outcomes[i * 6 : i * 6 + 6]
        steps = await store.load_steps(run_id)
        if i % 3 == 0:
            assert mine == ["lost"] * 6
            assert steps == []
            continue
        assert mine == ["ok"] * 6
        assert {s.call_id: s.result for s in steps} == {
            "c0": odd,
            **{f"c{j}": f'"{i}-{j}"' for j in range(1, 5)},
        }
        assert all(s.started_at == T0 + 0.125 and s.ended_at == T0 + 0.25 for s in steps)


async def test_finish_completed_records_result_and_final_step(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id

    await store.finish_workflow(
        run_id,
        token=held.token,
        status=WorkflowStatus.COMPLETED,
        result='{"total": 3}',
        error=None,
        now=T0 + 7,
        final_step=step(run_id, "final", T0 + 6, ended_at=T0 + 7),
    )

    record = await store.get_run(run_id)
    assert record is not None
    assert record.status is WorkflowStatus.COMPLETED
    assert record.result == '{"total": 3}'
    assert record.error is None
    assert record.ended_at == T0 + 7
    assert record.updated_at == T0 + 7
    assert record.lease_owner is None and record.lease_expires_at is None
    assert record.next_run_at is None
    assert await store.load_steps(run_id) == [step(run_id, "final", T0 + 6, ended_at=T0 + 7)]
    # Ended: the token owns nothing any more.
    with pytest.raises(errors.LeaseLost):
        await store.record_step(step(run_id, "late", T0 + 8), token=held.token)
    with pytest.raises(errors.LeaseLost):
        await store.finish_workflow(
            run_id,
            token=held.token,
            status=WorkflowStatus.FAILED,
            result=None,
            error='"again"',
            now=T0 + 8,
        )
    assert await store.get_run(run_id) == record
    assert await store.renew_leases([held.token], expires_at=T0 + 100) == set()


async def test_finish_failed(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    await store.finish_workflow(
        run_id,
        token=held.token,
        status=WorkflowStatus.FAILED,
        result=None,
        error='{"kind": "completable"}',
        now=T0 + 2,
    )
    record = await run_of(store, "k1")
    assert record.status is WorkflowStatus.FAILED
    assert record.error == '{"kind": "completable"}'
    assert record.result is None
    assert record.ended_at == T0 + 2
    assert await store.load_steps(run_id) == []


async def test_suspend(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id

    await store.suspend_workflow(
        run_id, token=held.token, error='{"kind": "incompletable"}', now=T0 + 2, next_run_at=T0 + 60
    )

    record = await run_of(store, "k1")
    assert record.status is WorkflowStatus.SUSPENDED
    assert record.error == '{"kind": "incompletable"}'
    assert record.updated_at == T0 + 2
    assert record.next_run_at == T0 + 60
    assert record.suspend_count == 1
    assert record.ended_at is None
    assert record.lease_owner is None and record.lease_expires_at is None
    with pytest.raises(errors.LeaseLost):
        await store.suspend_workflow(
            run_id, token=held.token, error='"again"', now=T0 + 3, next_run_at=T0 + 70
        )
    assert await run_of(store, "k1") == record

    # Suspended again after the next claim: the count goes on.
    [(_, again)] = await store.claim_due(
        owner="worker-b", now=T0 + 60, lease_timeout=LEASE, limit=5, exclude=()
    )
    await store.suspend_workflow(
        run_id, token=again.token, error='"e2"', now=T0 + 61, next_run_at=T0 + 120
    )
    assert (await run_of(store, "k1")).suspend_count == 2
