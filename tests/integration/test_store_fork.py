"""The Store contract of ``fork_workflow`` on every backend (``db_url``: SQLite and PostgreSQL):
one transaction creates a PENDING execution copying an ended one (name, arguments, queue, the
steps it keeps) that a worker can claim at once; a live source or a taken key creates nothing.

Times are explicit (``now``), as the engine passes them, so no test sleeps.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

import pytest

from sagaway.errors import PayloadError
from sagaway.states import StepStatus, WorkflowStatus
from sagaway.store import Store
from sagaway.store.grpc import GrpcStore
from sagaway.store.notices import READY, Notice, encode
from sagaway.store.records import ForkPayloads, ForkRequest, NewWorkflow, StepPayloads
from tests.store_helpers import LEASE, T0, run_of, running, step


async def _ended_source(store: Store, key: str = "src") -> str:
    """A FAILED execution of queue "payments" with steps 1, 2, 2/1 and 3; its run id."""
    held = await running(store, key)
    run_id = (await run_of(store, key)).run_id
    for call_id, at in (("1", 1.0), ("2", 2.0), ("2/1", 2.5), ("3", 3.0)):
        status = StepStatus.FAILED if call_id == "3" else StepStatus.COMPLETED
        await store.record_step(
            step(run_id, call_id, T0 + at, ended_at=T0 + at + 0.1, status=status, attempts=2),
            token=held.token,
        )
    await store.finish_workflow(
        run_id, token=held.token, status=WorkflowStatus.FAILED, result=None, error='"x"', now=T0 + 4
    )
    return run_id


async def _queued_source(store: Store) -> str:
    """Like ``_ended_source``, of task queue "payments"."""
    new = NewWorkflow(
        run_id=uuid.uuid4().hex,
        key="src",
        name="place_order",
        args='{"order": 7}',
        args_hash="h7",
        queue="payments",
    )
    created = await store.create_workflow(new, now=T0, lease=None, replace_live=False)
    assert created.created
    (record, held) = (
        await store.claim_due(owner="w", now=T0, lease_timeout=LEASE, limit=1, exclude=())
    )[0]
    await store.record_step(step(record.run_id, "1", T0 + 1, ended_at=T0 + 1.1), token=held.token)
    await store.finish_workflow(
        record.run_id,
        token=held.token,
        status=WorkflowStatus.FAILED,
        result=None,
        error='"x"',
        now=T0 + 2,
    )
    return record.run_id


async def test_fork_copies_the_source_and_the_kept_steps(store: Store) -> None:
    source_run = await _queued_source(store)
    result = await store.fork_workflow(
        ForkRequest(
            source_run_id=source_run,
            run_id="fork-run",
            key="fork",
            key_space="fork@fork-run",
            call_ids=("1",),
        ),
        now=T0 + 10,
    )
    assert result is not None and result.created
    record = result.record
    assert (record.run_id, record.key, record.key_space) == ("fork-run", "fork", "fork@fork-run")
    assert (record.name, record.args, record.args_hash) == ("place_order", '{"order": 7}', "h7")
    assert record.status is WorkflowStatus.PENDING and record.parent_key is None
    assert record.created_at == T0 + 10 and record.next_run_at == T0 + 10
    assert record.lease_owner is None and record.result is None and record.error is None
    source_steps = await store.load_steps(source_run)
    assert await store.load_steps("fork-run") == [
        dataclasses.replace(s, run_id="fork-run") for s in source_steps
    ]
    # Due at once, and only for a worker of the source's task queue.
    assert (
        await store.claim_due(
            owner="w", now=T0 + 10, lease_timeout=LEASE, limit=5, exclude=(), queues=["default"]
        )
        == []
    )
    claimed = await store.claim_due(
        owner="w", now=T0 + 10, lease_timeout=LEASE, limit=5, exclude=(), queues=["payments"]
    )
    assert [r.run_id for r, _ in claimed] == ["fork-run"]
    # The source is untouched.
    source = await store.get_run(source_run)
    assert source is not None and source.status is WorkflowStatus.FAILED and source.key == "src"


async def test_fork_keeps_only_the_named_steps(store: Store) -> None:
    source_run = await _ended_source(store)
    result = await store.fork_workflow(
        ForkRequest(
            source_run_id=source_run,
            run_id="r2",
            key="fork",
            key_space="fork@r2",
            call_ids=("1", "2/1"),
        ),
        now=T0 + 10,
    )
    assert result is not None and result.created
    steps = await store.load_steps("r2")
    assert [(s.call_id, s.attempts, s.started_at, s.ended_at) for s in steps] == [
        ("1", 2, T0 + 1, T0 + 1.1),
        ("2/1", 2, T0 + 2.5, T0 + 2.6),
    ]
    result = await store.fork_workflow(
        ForkRequest(
            source_run_id=source_run,
            run_id="r3",
            key="fork-none",
            key_space="fork-none@r3",
            call_ids=(),
        ),
        now=T0 + 10,
    )
    assert result is not None and result.created
    assert await store.load_steps("r3") == []


async def test_fork_payloads_replace_the_copies_in_the_same_transaction(store: Store) -> None:
    """A codec's payloads re-sealed for the new run (``payloads``) are what the fork holds:
    its arguments, and the result and error of each step they name; the rest is copied."""
    source_run = await _ended_source(store)
    payloads = ForkPayloads(
        args='"args sealed for r2"',
        steps=(StepPayloads("2", '"result sealed for r2"', '"error sealed for r2"'),),
    )
    result = await store.fork_workflow(
        ForkRequest(
            source_run_id=source_run,
            run_id="r2",
            key="fork",
            key_space="fork@r2",
            call_ids=("1", "2"),
            payloads=payloads,
        ),
        now=T0 + 10,
    )
    assert result is not None and result.created
    assert result.record.args == '"args sealed for r2"'
    stored = await store.get_run("r2")
    assert stored is not None and stored.args == '"args sealed for r2"'
    source_steps = {s.call_id: s for s in await store.load_steps(source_run)}
    steps = {s.call_id: s for s in await store.load_steps("r2")}
    assert steps["1"] == dataclasses.replace(source_steps["1"], run_id="r2")
    assert steps["2"] == dataclasses.replace(
        source_steps["2"],
        run_id="r2",
        result='"result sealed for r2"',
        error='"error sealed for r2"',
    )
    source = await store.get_run(source_run)
    assert source is not None and source.args == '{"order": 1}'  # the source keeps its own


async def test_fork_payloads_for_a_step_not_kept_create_nothing(store: Store) -> None:
    source_run = await _ended_source(store)
    with pytest.raises(ValueError, match=r"fork payloads name step '3', which the fork does not"):
        await store.fork_workflow(
            ForkRequest(
                source_run_id=source_run,
                run_id="r2",
                key="fork",
                key_space="fork@r2",
                call_ids=("1",),
                payloads=ForkPayloads(args="{}", steps=(StepPayloads("3", None, '"e"'),)),
            ),
            now=T0 + 10,
        )
    assert await store.get_workflow("fork") is None
    assert await store.get_run("r2") is None
    assert await store.load_steps("r2") == []


async def test_fork_payloads_beyond_one_server_request_are_refused_before_sending(
    store: Store,
) -> None:
    """The payloads travel with the fork (one transaction): the Engine Server takes at most
    two payloads' worth in a request, so a larger fork is refused by its client, clearly and
    before anything is sent; a store on the database takes it."""
    source_run = await _ended_source(store)
    big = '"' + "x" * 1_500_000 + '"'
    payloads = ForkPayloads(
        args=big, steps=(StepPayloads("1", big, None), StepPayloads("2", big, None))
    )
    fork = store.fork_workflow(
        ForkRequest(
            source_run_id=source_run,
            run_id="r2",
            key="fork",
            key_space="fork@r2",
            call_ids=("1", "2"),
            payloads=payloads,
        ),
        now=T0 + 10,
    )
    if not isinstance(store, GrpcStore):
        result = await fork
        assert result is not None and result.created and result.record.args == big
        return
    with pytest.raises(PayloadError, match=r"more than the Engine Server takes in one request"):
        await fork
    assert await store.get_workflow("fork") is None


async def test_fork_of_a_live_execution_creates_nothing(store: Store) -> None:
    await running(store, "live")
    live = await run_of(store, "live")
    result = await store.fork_workflow(
        ForkRequest(
            source_run_id=live.run_id, run_id="r", key="fork", key_space="fork@r", call_ids=()
        ),
        now=T0 + 1,
    )
    assert result is None
    assert await store.get_workflow("fork") is None
    assert (
        await store.fork_workflow(
            ForkRequest(
                source_run_id="no-such-run", run_id="r", key="fork", key_space="fork@r", call_ids=()
            ),
            now=T0 + 1,
        )
        is None
    )


async def test_fork_to_a_taken_key_creates_nothing(store: Store) -> None:
    source_run = await _ended_source(store)
    await running(store, "taken")
    taken = await run_of(store, "taken")
    result = await store.fork_workflow(
        ForkRequest(
            source_run_id=source_run, run_id="r", key="taken", key_space="taken@r", call_ids=("1",)
        ),
        now=T0 + 10,
    )
    assert result is not None and not result.created and result.record.run_id == taken.run_id
    assert await store.get_run("r") is None
    assert await store.load_steps("r") == []
    # Its own source's key is taken too.
    result = await store.fork_workflow(
        ForkRequest(
            source_run_id=source_run, run_id="r", key="src", key_space="src@r", call_ids=("1",)
        ),
        now=T0 + 10,
    )
    assert result is not None and not result.created and result.record.run_id == source_run


async def test_concurrent_forks_to_one_key_make_one_execution(store: Store, other: Store) -> None:
    source_run = await _ended_source(store)
    results = await asyncio.gather(
        *(
            s.fork_workflow(
                ForkRequest(
                    source_run_id=source_run,
                    run_id=f"r{i}",
                    key="fork",
                    key_space=f"fork@r{i}",
                    call_ids=("1", "2"),
                ),
                now=T0 + 10,
            )
            for i, s in enumerate((store, other, store, other))
        )
    )
    assert all(r is not None for r in results)
    assert sum(1 for r in results if r is not None and r.created) == 1
    winner = await run_of(store, "fork")
    assert {r.record.run_id for r in results if r is not None} == {winner.run_id}
    assert [s.call_id for s in await store.load_steps(winner.run_id)] == ["1", "2"]


async def test_fork_is_announced_to_listening_workers(postgres_url: str) -> None:
    """PostgreSQL: a fork's commit sends the 'ready:' notice a start no process owns sends, so
    idle workers of other processes take it without waiting for a poll."""
    from sagaway.store import open_store

    store, listener = open_store(postgres_url), open_store(postgres_url)
    await store.open()
    await listener.open()
    heard = asyncio.Event()
    notices: list[str] = []

    def on_notice(notice: Notice) -> None:
        notices.append(encode(notice))
        if notice == READY:
            heard.set()

    try:
        source_run = await _ended_source(store)
        await listener.listen(on_notice)
        heard.clear()
        notices.clear()
        result = await store.fork_workflow(
            ForkRequest(
                source_run_id=source_run,
                run_id="r",
                key="fork",
                key_space="fork@r",
                call_ids=("1",),
            ),
            now=T0 + 10,
        )
        assert result is not None and result.created
        await asyncio.wait_for(heard.wait(), 10)
    finally:
        await listener.close()
        await store.close()
    assert "ready:" in notices
