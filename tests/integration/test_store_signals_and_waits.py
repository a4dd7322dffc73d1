"""The Store contract on every backend (``db_url``: SQLite and PostgreSQL), part 3: signals
(send, receive, de-duplication, rejection) and durable waits (receive, timers, children).

Times are explicit (``now``), as the engine passes them, so no test sleeps.
"""

from __future__ import annotations

import asyncio

import pytest

from sagaway import errors
from sagaway.states import StepKind, StepStatus, WorkflowStatus
from sagaway.store import Store
from sagaway.store.records import SignalRecord, StepRecord
from tests.store_helpers import LEASE, T0, lease, new, raw_sql, receive, run_of, running, step

# ---------------------------------------------------------------------------- signals & waits


def waiting_for(db_url: str, run_id: str) -> str | None:
    (value,) = raw_sql(db_url, f"SELECT waiting_for FROM workflows WHERE run_id = '{run_id}'")[0]
    return None if value is None else str(value)


async def test_send_signal_to_unknown_or_ended(store: Store) -> None:
    assert await store.send_signal("nope", name="approve", payload="1", dedupe_id=None, now=T0) == (
        None,
        False,
    )
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    await store.finish_workflow(
        run_id, token=held.token, status=WorkflowStatus.COMPLETED, result=None, error=None, now=T0
    )
    done = await run_of(store, "k1")

    assert await store.send_signal(
        "k1", name="approve", payload="1", dedupe_id=None, now=T0 + 1
    ) == (done, False)
    assert await store.list_signals(run_id) == []


async def test_send_and_receive_signal(store: Store) -> None:
    held = await running(store, "k1")
    record = await run_of(store, "k1")

    sent = await store.send_signal(
        "k1", name="approve", payload='"yes"', dedupe_id=None, now=T0 + 1
    )

    assert sent == (record, True)
    [signal] = await store.list_signals(record.run_id)
    assert signal == SignalRecord(
        id=signal.id,
        name="approve",
        payload='"yes"',
        dedupe_id=None,
        created_at=T0 + 1,
        consumed_call=None,
        consumed_at=None,
        rejected=None,
    )
    assert await run_of(store, "k1") == record  # not waiting: nothing to wake

    assert await receive(store, record.run_id, held.token, call_id="c1", now=T0 + 3) == '"yes"'

    [signal] = await store.list_signals(record.run_id)
    assert (signal.consumed_call, signal.consumed_at, signal.rejected) == ("c1", T0 + 3, None)
    assert await store.load_steps(record.run_id) == [
        StepRecord(
            run_id=record.run_id,
            call_id="c1",
            kind=StepKind.SIGNAL,
            name="approve",
            status=StepStatus.COMPLETED,
            attempts=1,
            result='"yes"',
            error=None,
            started_at=T0 + 2,
            ended_at=T0 + 3,
        )
    ]
    # Delivered once: nothing more to receive, and no step for a receive that got nothing.
    assert await receive(store, record.run_id, held.token, call_id="c2") is None
    assert [s.call_id for s in await store.load_steps(record.run_id)] == ["c1"]
    assert (await run_of(store, "k1")).status is WorkflowStatus.RUNNING


async def test_a_signal_for_a_run_is_stored_in_that_run_only(store: Store) -> None:
    """``run_id``: a payload sealed for one execution (a codec binds it to its run) is stored
    only while that execution is the current one under the key."""
    await store.create_workflow(new("k1"), now=T0, lease=None, replace_live=False)
    first = await run_of(store, "k1")
    await store.create_workflow(new("k1"), now=T0 + 1, lease=None, replace_live=True)
    second = await run_of(store, "k1")
    assert second.run_id != first.run_id

    sent = await store.send_signal(
        "k1", name="approve", payload='"for 1"', dedupe_id=None, now=T0 + 2, run_id=first.run_id
    )
    assert sent == (second, False)  # the current one, to seal the payload for
    assert await store.list_signals(first.run_id) == []
    assert await store.list_signals(second.run_id) == []

    sent = await store.send_signal(
        "k1", name="approve", payload='"for 2"', dedupe_id=None, now=T0 + 3, run_id=second.run_id
    )
    assert sent == (second, True)
    assert [s.payload for s in await store.list_signals(second.run_id)] == ['"for 2"']


async def test_signals_are_delivered_oldest_first_by_name(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    for i, (name, payload) in enumerate([("a", "a1"), ("b", "b1"), ("a", "a2")]):
        assert (
            await store.send_signal("k1", name=name, payload=payload, dedupe_id=None, now=T0 + i)
        )[1]

    got = [
        await receive(store, run_id, held.token, name=name, call_id=f"c{i}")
        for i, name in enumerate(["a", "a", "b", "a", "b"])
    ]

    assert got == ["a1", "a2", "b1", None, None]
    signals = await store.list_signals(run_id)
    assert [(s.name, s.payload, s.consumed_call) for s in signals] == [
        ("a", "a1", "c0"),
        ("b", "b1", "c2"),
        ("a", "a2", "c1"),
    ]
    assert signals[0].id < signals[1].id < signals[2].id


async def test_signal_dedupe(store: Store) -> None:
    await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id

    assert (await store.send_signal("k1", name="a", payload="1", dedupe_id="d1", now=T0))[1]
    assert not (await store.send_signal("k1", name="a", payload="2", dedupe_id="d1", now=T0))[1]
    assert (await store.send_signal("k1", name="b", payload="3", dedupe_id="d1", now=T0))[1]
    assert (await store.send_signal("k1", name="a", payload="4", dedupe_id=None, now=T0))[1]
    assert (await store.send_signal("k1", name="a", payload="4", dedupe_id=None, now=T0))[1]

    signals = await store.list_signals(run_id)
    assert [(s.name, s.payload, s.dedupe_id) for s in signals] == [
        ("a", "1", "d1"),
        ("b", "3", "d1"),
        ("a", "4", None),
        ("a", "4", None),
    ]


async def test_rejected_signals_are_kept_and_skipped(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    await store.send_signal("k1", name="approve", payload="not json", dedupe_id=None, now=T0)
    await store.send_signal("k1", name="approve", payload='"ok"', dedupe_id=None, now=T0 + 1)

    def only_json_strings(payload: str) -> str | None:
        return None if payload.startswith('"') else "expected a JSON string"

    got = await receive(store, run_id, held.token, accept=only_json_strings, now=T0 + 5)

    assert got == '"ok"'
    rejected, delivered = await store.list_signals(run_id)
    assert rejected.rejected == "expected a JSON string"
    assert rejected.consumed_at == T0 + 5
    assert rejected.consumed_call is None
    assert delivered.consumed_call == "c1" and delivered.rejected is None
    assert await receive(store, run_id, held.token, call_id="c2") is None


async def test_receive_signal_is_fenced(store: Store) -> None:
    await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    await store.send_signal("k1", name="approve", payload="1", dedupe_id=None, now=T0)
    before = await run_of(store, "k1")

    for wait in (False, True):
        with pytest.raises(errors.LeaseLost):
            await receive(store, run_id, "not-the-token", wait=wait, deadline=T0 + 9)

    [signal] = await store.list_signals(run_id)
    assert signal.consumed_at is None
    assert await store.load_steps(run_id) == []
    assert await run_of(store, "k1") == before


async def test_receive_waits_and_a_signal_wakes_it(store: Store, db_url: str) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id

    got = await receive(store, run_id, held.token, wait=True, deadline=T0 + 100, now=T0 + 3)

    assert got is None
    record = await run_of(store, "k1")
    assert record.status is WorkflowStatus.WAITING
    assert record.next_run_at == T0 + 100
    assert record.updated_at == T0 + 3
    assert record.lease_owner is None and record.lease_expires_at is None
    assert waiting_for(db_url, run_id) == "signal:approve"
    assert await store.load_steps(run_id) == [
        step(
            run_id,
            "c1",
            T0 + 2,
            kind=StepKind.SIGNAL,
            name="approve",
            status=StepStatus.WAITING,
            result=None,
            ended_at=T0 + 100,
        )
    ]
    with pytest.raises(errors.LeaseLost):  # the lease was given up
        await store.record_step(step(run_id, "c9", T0 + 4), token=held.token)
    assert await store.renew_leases([held.token], expires_at=T0 + 500) == set()
    assert (
        await store.claim_due(owner="w", now=T0 + 50, lease_timeout=LEASE, limit=9, exclude=())
        == []
    )

    # A signal of another name does not wake it; this one does.
    await store.send_signal("k1", name="other", payload="0", dedupe_id=None, now=T0 + 40)
    assert (await run_of(store, "k1")).next_run_at == T0 + 100
    await store.send_signal("k1", name="approve", payload='"yes"', dedupe_id=None, now=T0 + 50)
    woken = await run_of(store, "k1")
    assert woken.status is WorkflowStatus.WAITING
    assert woken.next_run_at == T0 + 50
    assert woken.updated_at == T0 + 50
    assert await store.next_due(owner="w") == T0 + 50

    [(claimed, again)] = await store.claim_due(
        owner="w", now=T0 + 50, lease_timeout=LEASE, limit=9, exclude=()
    )
    assert claimed.run_id == run_id and claimed.status is WorkflowStatus.RUNNING
    assert waiting_for(db_url, run_id) is None
    assert await receive(store, run_id, again.token, now=T0 + 51) == '"yes"'
    [completed] = await store.load_steps(run_id)
    assert (completed.status, completed.result, completed.ended_at) == (
        StepStatus.COMPLETED,
        '"yes"',
        T0 + 51,
    )


async def test_receive_wait_deadline_makes_it_due(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    await receive(store, run_id, held.token, wait=True, deadline=T0 + 10)
    assert (
        await store.claim_due(owner="w", now=T0 + 9, lease_timeout=LEASE, limit=9, exclude=()) == []
    )
    [(claimed, _)] = await store.claim_due(
        owner="w", now=T0 + 10, lease_timeout=LEASE, limit=9, exclude=()
    )
    assert claimed.run_id == run_id


async def test_receive_wait_without_deadline_is_never_due_by_itself(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    await receive(store, run_id, held.token, wait=True, deadline=None)
    record = await run_of(store, "k1")
    assert record.status is WorkflowStatus.WAITING and record.next_run_at is None
    assert await store.next_due(owner="w") is None
    assert (
        await store.claim_due(owner="w", now=T0 + 1e6, lease_timeout=LEASE, limit=9, exclude=())
        == []
    )
    # ... until a signal comes.
    await store.send_signal("k1", name="approve", payload="1", dedupe_id=None, now=T0 + 7)
    assert await store.next_due(owner="w") == T0 + 7


async def test_wait_workflow_timer(store: Store, db_url: str) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    sleep = step(
        run_id, "s1", T0 + 1, kind=StepKind.SLEEP, name="sleep", result=None, ended_at=T0 + 60
    )

    with pytest.raises(errors.LeaseLost):
        await store.wait_workflow(
            run_id,
            token="not-the-token",
            waiting_for="timer",
            next_run_at=T0 + 60,
            step=sleep,
            now=T0 + 1,
        )
    assert await store.load_steps(run_id) == []
    assert (await run_of(store, "k1")).status is WorkflowStatus.RUNNING

    await store.wait_workflow(
        run_id, token=held.token, waiting_for="timer", next_run_at=T0 + 60, step=sleep, now=T0 + 1
    )

    record = await run_of(store, "k1")
    assert record.status is WorkflowStatus.WAITING
    assert record.next_run_at == T0 + 60
    assert record.updated_at == T0 + 1
    assert record.lease_owner is None and record.lease_expires_at is None
    assert waiting_for(db_url, run_id) == "timer"
    assert await store.load_steps(run_id) == [sleep]
    with pytest.raises(errors.LeaseLost):
        await store.wait_workflow(
            run_id,
            token=held.token,
            waiting_for="timer",
            next_run_at=T0 + 90,
            step=None,
            now=T0 + 2,
        )
    assert await store.next_due(owner="w") == T0 + 60
    assert (
        await store.claim_due(owner="w", now=T0 + 59, lease_timeout=LEASE, limit=9, exclude=())
        == []
    )
    [(claimed, again)] = await store.claim_due(
        owner="w", now=T0 + 60, lease_timeout=LEASE, limit=9, exclude=()
    )
    assert claimed.run_id == run_id
    # Without a step, only the state changes.
    await store.wait_workflow(
        run_id, token=again.token, waiting_for="timer", next_run_at=T0 + 120, step=None, now=T0 + 61
    )
    assert (await run_of(store, "k1")).next_run_at == T0 + 120
    assert await store.load_steps(run_id) == [sleep]


async def test_wait_for_child(store: Store, other: Store, db_url: str) -> None:
    held = await running(store, "parent")
    parent_id = (await run_of(store, "parent")).run_id
    created = await store.create_workflow(
        new("child", parent_key="parent"), now=T0, lease=None, replace_live=False
    )
    child_id = created.record.run_id

    assert (
        await store.wait_for_child(
            parent_id, token=held.token, child_key="nope", wait=True, now=T0 + 1
        )
        is None
    )
    with pytest.raises(errors.LeaseLost):
        await store.wait_for_child(
            parent_id, token="not-the-token", child_key="child", wait=True, now=T0 + 1
        )
    seen = await store.wait_for_child(
        parent_id, token=held.token, child_key="child", wait=False, now=T0 + 1
    )
    assert seen == created.record
    assert (await run_of(store, "parent")).status is WorkflowStatus.RUNNING

    seen = await store.wait_for_child(
        parent_id, token=held.token, child_key="child", wait=True, now=T0 + 2
    )

    assert seen == created.record
    parent = await run_of(store, "parent")
    assert parent.status is WorkflowStatus.WAITING
    assert parent.next_run_at is None
    assert parent.updated_at == T0 + 2
    assert parent.lease_owner is None
    assert waiting_for(db_url, parent_id) == "child:child"
    with pytest.raises(errors.LeaseLost):
        await store.record_step(step(parent_id, "c1", T0 + 3), token=held.token)
    # Only the child is due; its end makes the parent due at once.
    [(child, child_lease)] = await other.claim_due(
        owner="w", now=T0 + 5, lease_timeout=LEASE, limit=9, exclude=()
    )
    assert child.run_id == child_id
    await other.finish_workflow(
        child_id,
        token=child_lease.token,
        status=WorkflowStatus.COMPLETED,
        result='"r"',
        error=None,
        now=T0 + 20,
    )
    parent = await run_of(store, "parent")
    assert parent.status is WorkflowStatus.WAITING and parent.next_run_at == T0 + 20
    [(claimed, again)] = await store.claim_due(
        owner="w", now=T0 + 20, lease_timeout=LEASE, limit=9, exclude=()
    )
    assert claimed.run_id == parent_id

    # An ended child: returned, and the parent does not wait.
    ended = await store.wait_for_child(
        parent_id, token=again.token, child_key="child", wait=True, now=T0 + 21
    )
    assert ended is not None and ended.status is WorkflowStatus.COMPLETED
    assert (await run_of(store, "parent")).status is WorkflowStatus.RUNNING


@pytest.mark.parametrize("status", [WorkflowStatus.CANCELLED, WorkflowStatus.FAILED])
async def test_child_end_wakes_only_its_waiting_parent(
    store: Store, status: WorkflowStatus
) -> None:
    parents = {name: await running(store, name) for name in ("parent", "bystander")}
    child_lease = lease()
    child = await store.create_workflow(
        new("child", parent_key="parent"), now=T0, lease=child_lease, replace_live=False
    )
    await store.create_workflow(
        new("sibling", parent_key="bystander"), now=T0, lease=None, replace_live=False
    )
    for name, held in parents.items():
        kid = "child" if name == "parent" else "sibling"
        run_id = (await run_of(store, name)).run_id
        await store.wait_for_child(run_id, token=held.token, child_key=kid, wait=True, now=T0 + 1)

    if status is WorkflowStatus.CANCELLED:
        assert await store.end_workflow(child.record.run_id, status=status, error=None, now=T0 + 30)
    else:
        await store.finish_workflow(
            child.record.run_id,
            token=child_lease.token,
            status=status,
            result=None,
            error='"e"',
            now=T0 + 30,
        )

    assert (await run_of(store, "parent")).next_run_at == T0 + 30
    assert (await run_of(store, "bystander")).next_run_at is None


async def test_signal_never_lost_while_the_receiver_starts_waiting(
    store: Store, other: Store
) -> None:
    # The receiver decides to wait while the signal is being sent: either it receives the
    # signal, or it waits and the signal has made it due. Never waiting with a signal pending.
    for i in range(30):
        held = await running(store, f"k{i}")
        run_id = (await run_of(store, f"k{i}")).run_id
        got, (_, stored) = await asyncio.gather(
            receive(store, run_id, held.token, wait=True, deadline=None, now=T0 + 5),
            other.send_signal(f"k{i}", name="approve", payload="p", dedupe_id=None, now=T0 + 6),
        )
        assert stored
        record = await run_of(store, f"k{i}")
        if got is None:
            assert record.status is WorkflowStatus.WAITING
            assert record.next_run_at == T0 + 6, f"round {i}: lost wake-up"
        else:
            assert got == "p" and record.status is WorkflowStatus.RUNNING


@pytest.mark.parametrize("waiter", ["parent", "attached"])
async def test_child_end_never_lost_while_the_parent_starts_waiting(
    store: Store, other: Store, waiter: str
) -> None:
    # The waiter decides to wait while the child's end commits: either it sees the end, or it
    # waits and the end has made it due. "attached": the child is a top-level workflow, not
    # the waiter's own, and its end takes the store's fast path (batched on PostgreSQL).
    top_level = waiter == "attached"
    for i in range(30):
        held = await running(store, f"p{i}")
        parent_id = (await run_of(store, f"p{i}")).run_id
        child_lease = lease("worker-b")
        created = await store.create_workflow(
            new(f"c{i}", parent_key=None if top_level else f"p{i}"),
            now=T0,
            lease=child_lease,
            replace_live=False,
        )
        seen, _ = await asyncio.gather(
            store.wait_for_child(
                parent_id, token=held.token, child_key=f"c{i}", wait=True, now=T0 + 5
            ),
            other.finish_workflow(
                created.record.run_id,
                token=child_lease.token,
                status=WorkflowStatus.COMPLETED,
                result=None,
                error=None,
                now=T0 + 6,
                has_parent=not top_level,
            ),
        )
        assert seen is not None
        parent = await run_of(store, f"p{i}")
        if seen.status.ended:
            assert parent.status is WorkflowStatus.RUNNING
        else:
            assert parent.status is WorkflowStatus.WAITING
            assert parent.next_run_at == T0 + 6, f"round {i}: lost wake-up"


@pytest.mark.parametrize("end", ["finish", "finish_top_level", "end_by_request"])
async def test_an_end_wakes_every_workflow_waiting_for_it(store: Store, end: str) -> None:
    # The parent that created the child waits for it, and so does another workflow that
    # attached to it under the same key; a bystander waits for another child. The end wakes
    # the two waiters, in its own transaction, and leaves the bystander alone.
    waiters = {name: await running(store, name) for name in ("parent", "attached", "bystander")}
    child_lease = lease()
    top_level = end == "finish_top_level"
    child = await store.create_workflow(
        new("shared", parent_key=None if top_level else "parent"),
        now=T0,
        lease=child_lease,
        replace_live=False,
    )
    await store.create_workflow(
        new("other", parent_key="bystander"), now=T0, lease=None, replace_live=False
    )
    for name, held in waiters.items():
        run_id = (await run_of(store, name)).run_id
        kid = "other" if name == "bystander" else "shared"
        seen = await store.wait_for_child(
            run_id, token=held.token, child_key=kid, wait=True, now=T0 + 1
        )
        assert seen is not None and not seen.status.ended

    if end == "end_by_request":
        assert await store.end_workflow(
            child.record.run_id, status=WorkflowStatus.TERMINATED, error=None, now=T0 + 30
        )
    else:
        await store.finish_workflow(
            child.record.run_id,
            token=child_lease.token,
            status=WorkflowStatus.COMPLETED,
            result='"r"',
            error=None,
            now=T0 + 30,
            has_parent=not top_level,
        )

    assert (await run_of(store, "parent")).next_run_at == T0 + 30
    assert (await run_of(store, "attached")).next_run_at == T0 + 30
    assert (await run_of(store, "bystander")).next_run_at is None
    claimed = await store.claim_due(
        owner="w", now=T0 + 30, lease_timeout=LEASE, limit=9, exclude=()
    )
    woken = sorted(record.key for record, _ in claimed if record.key in waiters)
    assert woken == ["attached", "parent"]  # (the other child's lease has expired meanwhile)
