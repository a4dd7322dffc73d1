"""Debounced starts and per-key order through the Manager, on every backend, with a fake clock
where time matters (``FakeClock``: nothing here waits for a debounce period to pass).

- A burst of 100 starts runs once, with the last start's arguments, and every start's handle
  (and a start retried with its idempotency key) names that run; a start after it began
  begins a new burst.
- The maximum wait starts a burst that never goes quiet.
- Two Managers (two processes, as far as the data goes) starting one burst at once make one run.
- Executions of one ordering key started from two Managers run one at a time, in the order
  started, also while the one at the head waits for a timer.
- Misuse is refused with a ``ValueError`` that says why.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import sagaway as sw
from sagaway.testing import FakeClock


def _manager(db_url: str, clock: FakeClock | None, runs: list[Any], **extra: Any) -> sw.Manager:
    options: dict[str, Any] = {"poll_interval": 0.05, "recovery_interval": 0.2, **extra}
    if clock is not None:
        options["clock"] = clock
    manager = sw.Manager(db_url, **options)

    @manager.register_workflow
    async def notify(user: str, n: int) -> int:
        runs.append((user, n))
        return n

    @manager.register_activity
    async def record(account: str, n: int, phase: str) -> None:
        runs.append((account, n, phase))

    @manager.register_workflow
    async def post(account: str, n: int) -> int:
        await record(account, n, "begin")
        if n % 3 == 0:
            await manager.sleep(0.05)  # the head of the line WAITING holds it
        await record(account, n, "end")
        return n

    return manager


async def _burst_start(manager: sw.Manager, n: int, key: str, **kw: Any) -> sw.WorkflowHandle[Any]:
    return await manager.workflow("_manager.notify", "ann", n).execute(
        idempotency_key=key, debounce_key="ann", debounce=5.0, **kw
    )


async def test_a_burst_of_100_starts_runs_once_with_the_last_arguments(db_url: str) -> None:
    clock, runs = FakeClock(), []
    manager = _manager(db_url, clock, runs)
    async with manager:
        handles = []
        for i in range(100):
            handles.append(await _burst_start(manager, i, f"start-{i}"))
            await clock.advance(0.04)  # 4 s in all: never quiet for 5 s
        assert {(h.key, h.run_id) for h in handles} == {(handles[0].key, handles[0].run_id)}
        described = await handles[0].describe()
        assert described.status is sw.WorkflowStatus.PENDING
        assert described.debounce_key == "ann"
        # Due 5 s after the last start (the database's clock: measured from the first's).
        assert described.next_run_at == pytest.approx(described.created_at + 3.96 + 5, abs=0.5)
        assert runs == []
        result = await clock.run_until(handles[-1].result(), timeout=60)
        assert result == 99 and runs == [("ann", 99)]
        # A start retried with its own key finds the run it joined.
        again = await _burst_start(manager, 1000, "start-50")
        assert again.run_id == handles[0].run_id
        # Once the run started, the next start begins a new burst.
        later = await _burst_start(manager, 7, "start-later")
        assert later.run_id != handles[0].run_id
        assert await clock.run_until(later.result(), timeout=60) == 7


async def test_a_burst_sealed_by_a_codec_runs_with_the_last_arguments(db_url: str) -> None:
    """A joining start seals its arguments before the store finds the burst it joins: they are
    bound to the burst (workflow and debounce key), so the burst's run opens them (found by the
    generative test's debounced bursts with its codec: SUSPENDED with a PayloadKeyError)."""
    clock, runs = FakeClock(), []
    codec = sw.codecs.Encrypt(keys=[bytes(range(32))])
    manager = _manager(db_url, clock, runs, codec=codec)
    async with manager:
        first = await _burst_start(manager, 1, "sealed-1")
        last = await _burst_start(manager, 2, "sealed-2")
        assert last.run_id == first.run_id
        live = (sw.WorkflowStatus.PENDING, sw.WorkflowStatus.RUNNING)
        for _ in range(400):  # 20 s of the fake clock at most: due 5 s after the last start
            if (status := await first.status()) not in live:
                break
            await clock.advance(0.05)
            await asyncio.sleep(0.005)
        assert status is sw.WorkflowStatus.COMPLETED  # not SUSPENDED with a PayloadKeyError
    assert runs == [("ann", 2)]


async def test_the_maximum_wait_starts_a_burst_that_never_goes_quiet(db_url: str) -> None:
    clock, runs = FakeClock(), []
    manager = _manager(db_url, clock, runs)
    async with manager:
        first = await _burst_start(manager, 0, "s0", debounce_max_wait=10.0)
        n = 0
        while runs == []:  # a start every second, for longer than the maximum wait
            n += 1
            await clock.advance(1.0)
            await asyncio.sleep(0.05)  # real time for a due run to be claimed
            if runs:
                break
            await _burst_start(manager, n, f"s{n}", debounce_max_wait=10.0)
            assert n < 30, "the maximum wait did not start the burst"
        assert await first.result(timeout=30) == runs[0][1]
        assert 9 <= runs[0][1] <= 11  # the arguments of the last start before the bound


async def test_two_processes_starting_one_burst_make_one_run(db_url: str) -> None:
    clock, runs = FakeClock(), []
    first, second = _manager(db_url, clock, runs), _manager(db_url, clock, runs)
    async with first, second:
        handles = await asyncio.gather(
            *(
                (first if i % 2 else second)
                .workflow("_manager.notify", "bob", i)
                .execute(idempotency_key=f"b{i}", debounce_key="bob", debounce=5.0)
                for i in range(40)
            )
        )
        assert len({h.run_id for h in handles}) == 1
        await clock.run_until(handles[0].result(), timeout=60)
    assert len(runs) == 1


async def test_one_key_runs_in_the_order_started_from_two_processes(db_url: str) -> None:
    runs: list[Any] = []
    first, second = _manager(db_url, None, runs), _manager(db_url, None, runs)
    async with first, second:
        handles = []
        for n in range(12):
            starter = first if n % 2 else second
            handles.append(
                await starter.workflow("_manager.post", "acct-42", n).execute(
                    idempotency_key=f"post-{n}", ordering_key="acct-42"
                )
            )
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 90)
        described = await handles[0].describe()
    assert results == list(range(12))
    assert described.ordering_key == "acct-42"
    expected = [("acct-42", n, phase) for n in range(12) for phase in ("begin", "end")]
    assert runs == expected  # one at a time, in order: never two begun without an end


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"debounce": 1.0}, "need a debounce_key"),
        ({"debounce_max_wait": 1.0}, "need a debounce_key"),
        ({"debounce_key": "k"}, "needs debounce="),
        ({"debounce_key": "k", "debounce": -1.0}, "zero or more"),
        ({"debounce_key": "k", "debounce": float("nan")}, "zero or more"),
        ({"debounce_key": "k", "debounce": 5.0, "debounce_max_wait": 0.0}, "more than zero"),
        ({"debounce_key": "k", "debounce": 5.0, "debounce_max_wait": 2.0}, "at least debounce"),
        ({"debounce_key": "", "debounce": 5.0}, "debounce_key must be a non-empty"),
        ({"ordering_key": ""}, "ordering_key must be a non-empty"),
        (
            {"debounce_key": "k", "debounce": 5.0, "on_conflict": sw.OnConflict.FAIL},
            "must be ATTACH",
        ),
        (
            {
                "debounce_key": "k",
                "debounce": 5.0,
                "on_conflict": sw.OnConflict.TERMINATE_EXISTING,
            },
            "must be ATTACH",
        ),
    ],
)
async def test_misuse_is_refused(tmp_path: Any, options: dict[str, Any], message: str) -> None:
    runs: list[Any] = []
    manager = _manager(f"sqlite:///{tmp_path}/misuse.db", None, runs)
    async with manager:
        with pytest.raises(ValueError, match=message):
            await manager.workflow("_manager.notify", "ann", 1).execute(
                idempotency_key="x", **options
            )
        assert await manager.list_workflows() == []


async def test_a_child_cannot_take_an_order_or_a_debounce(tmp_path: Any) -> None:
    manager = sw.Manager(f"sqlite:///{tmp_path}/child.db", poll_interval=0.05)

    @manager.register_workflow
    async def child() -> int:
        return 1

    @manager.register_workflow
    async def parent(option: str) -> str:
        try:
            if option == "ordering_key":
                await manager.workflow(child).execute(ordering_key="k")
            else:
                await manager.workflow(child).execute(debounce_key="k", debounce=1.0)
        except ValueError as exc:
            return str(exc)
        return "started"

    async with manager:
        for option in ("ordering_key", "debounce"):
            said = await manager.workflow(parent, option).execute_get(timeout=30)
            assert "top-level starts" in said
