"""The Store contract on every backend (``db_url``: SQLite and PostgreSQL), part 4: what the
operator reads. The error of every failed attempt of a step (kept by the database when a step
is written with an error), and listing pages: filters and keyset pagination.

Times are explicit (``now``), as the engine passes them, so no test sleeps.
"""

from __future__ import annotations

import asyncio

from sagaway.states import StepStatus, WorkflowStatus
from sagaway.store import Store
from sagaway.store.records import AttemptErrorRecord, ListQuery, StepRecord
from tests.store_helpers import T0, lease, new, run_of, running, step

# ---------------------------------------------------------------------------- attempt errors


def _error(n: int) -> str:
    return f'{{"kind": "retryable", "type": "Boom", "message": "attempt {n}"}}'


def _failed(
    run_id: str, n: int, status: StepStatus = StepStatus.RETRYING, error: int | None = None
) -> StepRecord:
    """Attempt ``n`` of step c1 failed at T0 + n (with the error of attempt ``error``)."""
    return step(
        run_id,
        "c1",
        T0,
        status=status,
        attempts=n,
        result=None,
        error=_error(n if error is None else error),
        ended_at=T0 + n,
    )


async def test_every_failed_attempt_keeps_its_error(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    for n in (1, 2):
        await store.record_step(_failed(run_id, n), token=held.token)
    await store.record_step(step(run_id, "c1", T0, attempts=3, ended_at=T0 + 3), token=held.token)
    await store.record_step(step(run_id, "c2", T0 + 4, ended_at=T0 + 5), token=held.token)

    assert await store.list_attempt_errors(run_id) == [
        AttemptErrorRecord("c1", 1, _error(1), T0 + 1),
        AttemptErrorRecord("c1", 2, _error(2), T0 + 2),
    ]
    steps = {s.call_id: s for s in await store.load_steps(run_id)}
    assert steps["c1"].error is None and steps["c1"].status is StepStatus.COMPLETED


async def test_final_step_error_and_rewrites_of_one_attempt(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    first = _failed(run_id, 1)
    await store.record_step(first, token=held.token)
    await store.record_step(first, token=held.token)  # the same attempt written again
    failed = _failed(run_id, 2, StepStatus.FAILED)
    await store.finish_workflow(
        run_id,
        token=held.token,
        status=WorkflowStatus.FAILED,
        result=None,
        error=_error(2),
        now=T0 + 3,
        final_step=failed,
        has_parent=False,
    )
    assert [(e.attempt, e.error) for e in await store.list_attempt_errors(run_id)] == [
        (1, _error(1)),
        (2, _error(2)),
    ]


async def test_a_step_written_again_without_an_error_keeps_the_error_of_its_attempt(
    store: Store,
) -> None:
    """The step row holds the latest attempt's error; a rewrite of the same attempt without an
    error (or a later attempt) must not lose it."""
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    await store.record_step(_failed(run_id, 1), token=held.token)
    assert await store.list_attempt_errors(run_id) == [
        AttemptErrorRecord("c1", 1, _error(1), T0 + 1)
    ]
    await store.record_step(step(run_id, "c1", T0, attempts=1, ended_at=T0 + 2), token=held.token)
    assert await store.list_attempt_errors(run_id) == [
        AttemptErrorRecord("c1", 1, _error(1), T0 + 1)
    ]
    [c1] = await store.load_steps(run_id)
    assert c1.error is None


async def test_the_last_twenty_attempts_are_kept(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    for n in range(1, 26):
        await store.record_step(_failed(run_id, n), token=held.token)
    assert [e.attempt for e in await store.list_attempt_errors(run_id)] == list(range(6, 26))
    # The 26th attempt succeeds: the errors of the 20 failed attempts before it stay.
    await store.record_step(step(run_id, "c1", T0, attempts=26, ended_at=T0 + 26), token=held.token)
    assert [e.attempt for e in await store.list_attempt_errors(run_id)] == list(range(6, 26))


async def test_grouped_step_writes_keep_errors_of_every_run(store: Store) -> None:
    """Steps of many executions written at once (a group commit on PostgreSQL)."""
    runs: list[tuple[str, str]] = []
    for i in range(8):
        held = await running(store, f"k{i}")
        runs.append(((await run_of(store, f"k{i}")).run_id, held.token))
    await asyncio.gather(
        *(
            store.record_step(_failed(run_id, 1, error=i), token=token)
            for i, (run_id, token) in enumerate(runs)
        )
    )
    for i, (run_id, _) in enumerate(runs):
        assert await store.list_attempt_errors(run_id) == [
            AttemptErrorRecord("c1", 1, _error(i), T0 + 1)
        ]


# ---------------------------------------------------------------------------- list pages


async def _populate(store: Store) -> list[str]:
    """30 workflows, several created at the same instant; keys newest first (as listed)."""
    created: list[tuple[float, str, str]] = []
    for i in range(30):
        now = T0 + i // 3  # three per instant: ties broken by run_id
        created_now = await store.create_workflow(
            new(f"w{i:02}"), now=now, lease=None, replace_live=False
        )
        record = created_now.record
        created.append((now, record.run_id, record.key))
    created.sort(key=lambda c: (-c[0], c[1]))
    return [key for _, _, key in created]


async def test_pages_list_every_row_exactly_once_in_order(store: Store) -> None:
    expected = await _populate(store)
    seen: list[str] = []
    after: tuple[float, str] | None = None
    while True:
        page = await store.list_page(ListQuery(limit=7, after=after))
        seen += [r.key for r in page]
        if len(page) < 7:
            break
        after = (page[-1].created_at, page[-1].run_id)
    assert seen == expected


async def test_since_until_bounds_and_filters(store: Store) -> None:
    await _populate(store)
    # created_at T0 + 2 .. T0 + 3 inclusive-exclusive: w06, w07, w08.
    page = await store.list_page(ListQuery(limit=100, since=T0 + 2, until=T0 + 3))
    assert sorted(r.key for r in page) == ["w06", "w07", "w08"]
    page = await store.list_page(ListQuery(limit=100, until=T0 + 1))
    assert sorted(r.key for r in page) == ["w00", "w01", "w02"]
    page = await store.list_page(ListQuery(limit=100, key_prefix="w1"))
    assert sorted(r.key for r in page) == [f"w1{i}" for i in range(10)]
    page = await store.list_page(ListQuery(limit=100, name="nosuch"))
    assert page == []
    assert len(await store.list_page(ListQuery(limit=100, name="place_order"))) == 30


async def test_status_filter_takes_several_statuses(store: Store) -> None:
    await _populate(store)
    held = lease()
    await store.create_workflow(new("live"), now=T0 + 50, lease=held, replace_live=False)
    await store.end_workflow(
        (await run_of(store, "w00")).run_id, status=WorkflowStatus.CANCELLED, error=None, now=T0
    )
    query = ListQuery(
        limit=100, statuses=frozenset({WorkflowStatus.RUNNING, WorkflowStatus.CANCELLED})
    )
    assert [r.key for r in await store.list_page(query)] == ["live", "w00"]
