"""Engine semantics through the public API, on every backend (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import itertools
import uuid
from decimal import Decimal
from typing import Any

import pydantic
import pytest

import sagaway as sw
from sagaway.testing import FakeClock
from sagaway.testing.internals import engine_of, store_of


class Tier(enum.Enum):
    GOLD = "gold"
    SILVER = "silver"


@dataclasses.dataclass(frozen=True)
class Order:
    id: int
    amount: Decimal
    placed: datetime.datetime
    ref: uuid.UUID
    tier: Tier


class Address(pydantic.BaseModel):
    city: str
    lines: list[str]


class Declined(sw.CompletableError):
    """The card was declined."""


ORDER = Order(
    7, Decimal("12.30"), datetime.datetime(2026, 1, 2, 3, 4, 5), uuid.UUID(int=42), Tier.GOLD
)


def make_manager(db_url: str, **options: Any) -> sw.Manager:
    options.setdefault("poll_interval", 0.05)
    return sw.Manager(db_url, **options)


async def test_typed_payloads_round_trip(db_url: str) -> None:
    manager = make_manager(db_url)

    @manager.register_activity
    async def ship(order: Order, to: Address) -> tuple[Order, Address]:
        return order, to

    @manager.register_workflow
    async def flow(order: Order, to: Address) -> dict[str, Order | Address]:
        got_order, got_to = await ship(order, to)
        assert isinstance(got_order, Order) and isinstance(got_to, Address)
        return {"order": got_order, "to": got_to}

    async with manager:
        result = await manager.workflow(
            flow, ORDER, Address(city="Tokyo", lines=["1-2-3"])
        ).execute_get()
    assert result == {"order": ORDER, "to": Address(city="Tokyo", lines=["1-2-3"])}


async def test_completable_error_compensates_in_reverse_and_is_not_retried(db_url: str) -> None:
    manager = make_manager(db_url)
    calls: list[str] = []

    @manager.register_activity(retry=sw.RetryPolicy(maximum_attempts=5, initial_interval=0))
    async def step(name: str) -> str:
        calls.append(name)
        if name == "charge":
            raise Declined("insufficient funds", code="NSF")
        return name

    @manager.register_activity
    async def undo(name: str) -> None:
        calls.append(f"undo-{name}")

    @manager.register_workflow
    async def checkout() -> str:
        async with sw.Saga() as saga:
            for name in ("reserve", "points", "charge", "never"):
                await step(name)
                saga.add_compensation(undo, name)
        return "done"

    async with manager:
        handle = await manager.workflow(checkout).execute(idempotency_key="co-1")
        with pytest.raises(Declined) as info:
            await handle.result()
        assert info.value.code == "NSF"
        assert await handle.status() is sw.WorkflowStatus.FAILED
        description = await handle.describe()
    assert calls == ["reserve", "points", "charge", "undo-points", "undo-reserve"]
    charge = [
        s for s in description.steps if s.name.endswith("step") and s.status is sw.StepStatus.FAILED
    ]
    assert len(charge) == 1 and charge[0].attempts == 1
    assert [s.kind for s in description.steps][-2:] == [sw.StepKind.COMPENSATION] * 2
    assert description.error is not None and description.error["kind"] == "completable"


async def test_retryable_error_backs_off_by_policy(db_url: str) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock=clock)
    attempts: list[float] = []

    @manager.register_activity(
        retry=sw.RetryPolicy(
            initial_interval=1.0, backoff_coefficient=2.0, maximum_interval=30.0, maximum_attempts=4
        )
    )
    async def flaky() -> int:
        attempts.append(clock.now())
        if len(attempts) < 3:
            raise sw.RetryableError("try again")
        return sw.activity_info().attempt

    @manager.register_workflow
    async def flow() -> int:
        return await flaky()

    async with manager:
        handle = await manager.workflow(flow).execute()
        await clock.wait_for_sleep(1.0)
        await clock.advance(1.0)
        await clock.wait_for_sleep(2.0)
        await clock.advance(2.0)
        assert await handle.result(timeout=10) == 3
        steps = (await handle.describe()).steps
    assert [b - a for a, b in itertools.pairwise(attempts)] == [1.0, 2.0]
    assert steps[0].attempts == 3 and steps[0].status is sw.StepStatus.COMPLETED


async def test_retry_exhaustion_suspends(db_url: str) -> None:
    manager = make_manager(db_url)

    @manager.register_activity(retry=sw.RetryPolicy(initial_interval=0, maximum_attempts=2))
    async def always_busy() -> None:
        raise sw.RetryableError("busy")

    @manager.register_workflow
    async def flow() -> None:
        await always_busy()

    async with manager:
        handle = await manager.workflow(flow).execute()
        await _wait_status(handle, sw.WorkflowStatus.SUSPENDED)
        d = await handle.describe()
    assert d.error is not None and "RetriesExhausted" in d.error["type"]
    assert d.steps[0].attempts == 2 and d.steps[0].status is sw.StepStatus.ERROR


async def test_unknown_exception_suspends_then_recovery_completes_it(db_url: str) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock=clock, recovery_interval=10.0)
    broken = {"on": True}
    done: list[str] = []

    @manager.register_activity
    async def first() -> str:
        done.append("first")
        return "a"

    @manager.register_activity
    async def second() -> str:
        if broken["on"]:
            raise ConnectionError("inventory service unreachable")
        done.append("second")
        return "b"

    @manager.register_workflow
    async def flow() -> str:
        return await first() + await second()

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="wf")
        await _wait_status(handle, sw.WorkflowStatus.SUSPENDED)
        d = await handle.describe()
        assert d.error is not None and d.error["type"] == "builtins.ConnectionError"
        assert "inventory service unreachable" in d.error["message"]
        suspended_at = clock.now()
        broken["on"] = False
        assert await clock.run_until(handle.result()) == "ab"
        # Resumed by the Recovery Worker once the backoff (recovery_interval) had passed.
        assert clock.now() - suspended_at >= 10.0
    assert done == ["first", "second"]  # the completed step did not run again


async def test_swallowed_incompletable_error_still_suspends(db_url: str) -> None:
    manager = make_manager(db_url)

    @manager.register_activity
    async def boom() -> None:
        raise RuntimeError("unexpected")

    @manager.register_workflow
    async def flow() -> str:
        try:
            await boom()
        except Exception:
            return "pretend all is well"
        return "unreachable"

    async with manager:
        handle = await manager.workflow(flow).execute()
        await _wait_status(handle, sw.WorkflowStatus.SUSPENDED)
        d = await handle.describe()
    assert d.error is not None and d.error["message"] == "unexpected"


async def test_activity_timeout_suspends(db_url: str) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock=clock)
    release = asyncio.Event()

    @manager.register_activity(timeout=5.0)
    async def slow() -> None:
        await release.wait()

    @manager.register_workflow
    async def flow() -> None:
        await slow()

    async with manager:
        handle = await manager.workflow(flow).execute()
        await clock.wait_for_sleep(5.0)
        await clock.advance(5.0)
        await _wait_status(handle, sw.WorkflowStatus.SUSPENDED)
        d = await handle.describe()
        release.set()
    assert d.error is not None and "ActivityTimeout" in d.error["type"]


async def test_concurrent_starts_with_one_key_make_one_execution(db_url: str) -> None:
    runs: list[str] = []
    managers = [make_manager(db_url) for _ in range(2)]
    for manager in managers:

        @manager.register_activity(name="work")
        async def work(x: int) -> int:
            runs.append(sw.activity_info().run_id)
            await asyncio.sleep(0.01)
            return x * 2

        @manager.register_workflow(name="double")
        async def double(x: int) -> int:
            return await work(x)

    async with managers[0], managers[1]:
        results = await asyncio.gather(
            *(m.workflow("double", 21).execute_get(idempotency_key="same") for m in managers * 10)
        )
    assert results == [42] * 20
    assert len(runs) == 1


async def test_on_conflict_policies(db_url: str) -> None:
    manager = make_manager(db_url)
    gate = asyncio.Event()
    executions: list[int] = []

    @manager.register_activity
    async def wait_gate(x: int) -> int:
        executions.append(x)
        if x == 1:
            await gate.wait()
        return x

    @manager.register_workflow
    async def flow(x: int) -> int:
        return await wait_gate(x)

    async with manager:
        first = await manager.workflow(flow, 1).execute(idempotency_key="k")
        again = await manager.workflow(flow, 1).execute(idempotency_key="k")
        assert again.run_id == first.run_id
        with pytest.raises(sw.WorkflowAlreadyExists):
            await manager.workflow(flow, 1).execute(
                idempotency_key="k", on_conflict=sw.OnConflict.FAIL
            )
        with pytest.raises(sw.IdempotencyConflict):
            await manager.workflow(flow, 2).execute(idempotency_key="k")
        replaced = await manager.workflow(flow, 3).execute(
            idempotency_key="k", on_conflict=sw.OnConflict.TERMINATE_EXISTING
        )
        assert replaced.run_id != first.run_id
        assert await replaced.result(timeout=10) == 3
        with pytest.raises(sw.WorkflowCancelled):
            await first.result(timeout=10)
        assert await first.status() is sw.WorkflowStatus.TERMINATED
        # A finished key is never run again.
        assert await manager.workflow(flow, 3).execute_get(idempotency_key="k") == 3
        with pytest.raises(sw.WorkflowAlreadyExists):
            await manager.workflow(flow, 3).execute(
                idempotency_key="k", on_conflict=sw.OnConflict.TERMINATE_EXISTING
            )
        gate.set()
    assert executions == [1, 3]


async def test_bad_input_gets_clear_errors_and_loses_nothing(db_url: str) -> None:
    manager = make_manager(db_url, payload_limit=4096)

    async def unregistered() -> None: ...

    @manager.register_workflow
    async def flow(data: Any) -> None: ...

    async with manager:
        with pytest.raises(sw.NotRegistered, match="not registered"):
            await manager.workflow(unregistered).execute()  # sagaway: ignore[SW201]
        with pytest.raises(sw.PayloadError, match=r"argument 'data'.*cannot be serialised"):
            await manager.workflow(flow, object()).execute()
        with pytest.raises(sw.PayloadError, match="over the 4096-byte payload limit"):
            await manager.workflow(flow, "x" * 5000).execute()
        with pytest.raises(TypeError, match="flow"):
            await manager.workflow(flow, 1, 2).execute()  # type: ignore[call-arg]
        assert await manager.list_workflows() == []
        with pytest.raises(sw.WorkflowNotFound):
            await manager.get_workflow("nope").status()


async def test_workflow_name_missing_from_code_suspends_until_deployed(db_url: str) -> None:
    old = make_manager(db_url)

    @old.register_workflow(name="legacy")
    async def legacy_v1() -> str:
        return "v1"

    async with old.connect():
        await old.workflow(legacy_v1).execute(idempotency_key="L")
    current = make_manager(db_url)
    async with current:
        handle = current.get_workflow("L")
        await _wait_status(handle, sw.WorkflowStatus.SUSPENDED)
        d = await handle.describe()
    assert (
        d.error is not None
        and "'legacy'" in d.error["message"]
        and "not registered" in d.error["message"]
    )
    fixed = make_manager(db_url)

    @fixed.register_workflow(name="legacy")
    async def legacy_v2() -> str:
        return "v2"

    async with fixed:
        assert await fixed.retry("L")
        assert await fixed.get_workflow("L").result(timeout=10) == "v2"


async def test_changed_code_is_a_nondeterminism_error(db_url: str) -> None:
    v1 = make_manager(db_url)

    @v1.register_activity(name="a")
    async def a() -> int:
        return 1

    @v1.register_activity(name="b")
    async def b() -> int:
        raise RuntimeError("stop here")

    @v1.register_workflow(name="flow")
    async def flow_v1() -> int:
        return await a() + await b()

    async with v1:
        handle = await v1.workflow(flow_v1).execute(idempotency_key="nd")
        await _wait_status(handle, sw.WorkflowStatus.SUSPENDED)

    v2 = make_manager(db_url)

    @v2.register_activity(name="a")
    async def a2() -> int:
        return 1

    @v2.register_activity(name="b")
    async def b2() -> int:
        return 2

    @v2.register_workflow(name="flow")
    async def flow_v2() -> int:
        return await b2() + await a2()  # the order changed

    async with v2:
        assert await v2.retry("nd")
        handle = v2.get_workflow("nd")
        await _wait_for(
            handle, lambda d: d.error is not None and "NonDeterminismError" in d.error["type"]
        )
        assert await handle.status() is sw.WorkflowStatus.SUSPENDED


async def test_parallel_branches_replay_without_running_again(db_url: str) -> None:
    manager = make_manager(db_url, recovery_interval=0.05)
    ran: list[str] = []
    fail = {"on": True}

    @manager.register_activity
    async def leg(name: str, delay: float) -> str:
        ran.append(name)
        await asyncio.sleep(delay)
        return name

    @manager.register_activity
    async def finish() -> str:
        if fail["on"]:
            fail["on"] = False
            raise RuntimeError("crash after the parallel part")
        return "end"

    async def branch(prefix: str, delay: float) -> list[str]:
        return [await leg(f"{prefix}1", delay), await leg(f"{prefix}2", 0)]

    @manager.register_workflow
    async def fan_out() -> list[Any]:
        results = await asyncio.gather(branch("a", 0.03), branch("b", 0))
        return [*results, await finish()]

    async with manager:
        handle = await manager.workflow(fan_out).execute()
        assert await handle.result(timeout=20) == [["a1", "a2"], ["b1", "b2"], "end"]
        d = await handle.describe()
    assert sorted(ran) == ["a1", "a2", "b1", "b2"]  # the replay ran none of them again
    assert {s.call_id for s in d.steps} == {"1/1", "1/2", "2/1", "2/2", "1"}


async def test_each_effect_runs_after_every_earlier_outcome_is_durable(db_url: str) -> None:
    """Outcomes are written with the next durable action, never later: an activity (here, of
    parallel branches too) sees every outcome the workflow returned before it committed, as a
    second process reading the database would; the last one commits with the end."""
    manager = make_manager(db_url)
    seen: dict[str, set[str]] = {}
    writes: list[str] = []

    @manager.register_activity
    async def step(name: str) -> str:
        info = sw.activity_info()
        async with sw.Manager(db_url).connect() as reader:  # another process's view
            described = await reader.get_workflow(info.workflow_key).describe()
        seen[name] = {s.call_id for s in described.steps if s.status.value == "COMPLETED"}
        return name

    async def branch(prefix: str) -> list[str]:
        return [await step(f"{prefix}1"), await step(f"{prefix}2")]

    @manager.register_workflow
    async def ordered() -> list[Any]:
        first = await step("s1")
        both = await asyncio.gather(branch("a"), branch("b"))
        return [first, *both, await step("s2")]

    async with manager:
        store = store_of(manager)
        for verb in ("record_step", "finish_workflow"):
            original = getattr(store, verb)

            async def counted(*args: Any, _verb: str = verb, _f: Any = original, **kw: Any) -> Any:
                writes.append(_verb)
                return await _f(*args, **kw)

            setattr(store, verb, counted)
        handle = await manager.workflow(ordered).execute()
        assert await handle.result(timeout=20) == ["s1", ["a1", "a2"], ["b1", "b2"], "s2"]
        d = await handle.describe()

    # Call ids: "1" (s1), "1/1" "1/2" (branch a), "2/1" "2/2" (branch b), "2" (s2).
    assert seen["s1"] == set()
    assert {"1"} <= seen["a1"] and {"1"} <= seen["b1"]
    assert {"1", "1/1"} <= seen["a2"] and {"1", "2/1"} <= seen["b2"]
    assert seen["s2"] == {"1", "1/1", "1/2", "2/1", "2/2"}
    assert {s.call_id for s in d.steps} == {"1", "1/1", "1/2", "2/1", "2/2", "2"}
    # Six outcomes, five step writes at most: the last outcome went with the end.
    assert writes.count("finish_workflow") == 1 and writes.count("record_step") == 5


async def test_shutdown_keeps_outcomes_not_written_yet(db_url: str) -> None:
    """A finished activity whose outcome waits for the next durable action is written when the
    worker shuts down, so the next owner does not run it again."""
    runs: list[str] = []
    parked = asyncio.Event()

    def build() -> tuple[sw.Manager, Any, asyncio.Event]:
        manager = make_manager(db_url)
        go_on = asyncio.Event()

        @manager.register_activity
        async def charge() -> str:
            runs.append("charge")
            return "charged"

        @manager.register_workflow
        async def pay() -> str:
            charged = await charge()
            parked.set()
            await go_on.wait()  # not durable: nothing written before the shutdown
            return charged

        return manager, pay, go_on

    first, pay, _ = build()
    async with first:
        await first.workflow(pay).execute(idempotency_key="pay-1")
        await asyncio.wait_for(parked.wait(), 10)
    second, _, go_on = build()
    go_on.set()
    async with second:
        assert await second.get_workflow("pay-1").result(timeout=20) == "charged"
    assert runs == ["charge"]


async def test_shutdown_during_the_end_write_keeps_the_last_outcome(db_url: str) -> None:
    """The last outcome travels with the end; if shutdown cancels that write, the outcome is
    pending again, so the shutdown flush records it and the next owner does not re-run it."""
    runs: list[str] = []
    stuck = asyncio.Event()

    def build() -> tuple[sw.Manager, Any]:
        manager = make_manager(db_url)

        @manager.register_activity
        async def charge() -> str:
            runs.append("charge")
            return "charged"

        @manager.register_workflow
        async def pay() -> str:
            return await charge()

        return manager, pay

    first, pay = build()
    async with first:
        store = store_of(first)

        async def hangs(*args: Any, **kwargs: Any) -> None:
            stuck.set()
            await asyncio.Event().wait()  # the end's write never finishes

        store.finish_workflow = hangs  # type: ignore[method-assign]
        await first.workflow(pay).execute(idempotency_key="pay-1")
        await asyncio.wait_for(stuck.wait(), 10)
    second, _ = build()
    async with second:
        assert await second.get_workflow("pay-1").result(timeout=20) == "charged"
    assert runs == ["charge"]


async def test_an_outcome_pending_when_a_wait_unloads_is_written_first(db_url: str) -> None:
    """A receive waiting beside a running activity unloads once the activity is done; the
    activity's outcome must be committed before the lease is given up, or it runs again."""
    manager = make_manager(db_url)
    runs: list[str] = []
    entered, release = asyncio.Event(), asyncio.Event()

    @manager.register_activity
    async def charge() -> str:
        runs.append("charge")
        entered.set()
        await release.wait()
        return "charged"

    @manager.register_workflow
    async def pay() -> list[str]:
        charged, go = await asyncio.gather(charge(), manager.signal("go").receive(str))
        return [charged, go]

    async with manager:
        handle = await manager.workflow(pay).execute(idempotency_key="pay-1")
        await asyncio.wait_for(entered.wait(), 10)
        release.set()
        for _ in range(400):  # explicit: wait until the workflow has unloaded itself
            if await handle.status() is sw.WorkflowStatus.WAITING:
                break
            await asyncio.sleep(0.025)
        assert await handle.status() is sw.WorkflowStatus.WAITING
        await manager.signal("go").send("pay-1", "now")
        assert await handle.result(timeout=20) == ["charged", "now"]
    assert runs == ["charge"]


async def test_a_heartbeat_while_the_end_is_written_does_not_stop_the_workflow(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The end clears the lease, so a heartbeat that runs while the end's write is being
    acknowledged does not renew it: that is an execution finishing, not a lost lease."""
    clock = FakeClock()
    manager = make_manager(db_url, clock=clock, lease_timeout=30.0)
    committed, go_on, renewed = asyncio.Event(), asyncio.Event(), asyncio.Event()

    @manager.register_activity
    async def charge() -> str:
        return "charged"

    @manager.register_workflow
    async def pay() -> str:
        return await charge()

    async with manager:
        engine = engine_of(manager)
        store = engine.store
        finish, renew = store.finish_workflow, store.renew_leases

        async def slow_acknowledgement(*args: Any, **kwargs: Any) -> None:
            await finish(*args, **kwargs)  # committed: the row holds no lease any more
            committed.set()
            await go_on.wait()

        async def observed_renewal(*args: Any, **kwargs: Any) -> set[str]:
            kept = await renew(*args, **kwargs)
            renewed.set()
            return kept

        store.finish_workflow = slow_acknowledgement  # type: ignore[method-assign]
        store.renew_leases = observed_renewal  # type: ignore[method-assign]
        handle = await manager.workflow(pay).execute(idempotency_key="pay-1")
        await asyncio.wait_for(committed.wait(), 10)
        await clock.wait_for_sleep(10.0)  # the heartbeat, every lease_timeout / 3
        await clock.advance(10.0)
        await asyncio.wait_for(renewed.wait(), 10)
        await asyncio.sleep(0)  # let the heartbeat act on what it renewed
        go_on.set()
        assert await handle.result(timeout=10) == "charged"
        assert handle.run_id in engine.recent_ends  # it ended here, it was not cancelled
    assert not [r for r in caplog.records if getattr(r, "action", None) == "lease_lost"]


async def test_nothing_runs_past_an_outcome_that_could_not_be_written(db_url: str) -> None:
    """When writing a pending outcome fails, no branch starts another activity; recovery then
    runs the unwritten ones again and the workflow completes."""
    runs: list[str] = []
    b1_started, b1_may_finish, b1_done = asyncio.Event(), asyncio.Event(), asyncio.Event()
    over = {"a": asyncio.Event(), "b": asyncio.Event()}

    def build(lease_timeout: float) -> tuple[sw.Manager, Any]:
        manager = make_manager(db_url, lease_timeout=lease_timeout)

        @manager.register_activity
        async def act(name: str) -> str:
            runs.append(name)
            if name == "a1":
                await b1_started.wait()  # b1 is running when a1's outcome fails to be written
            if name == "b1":
                b1_started.set()
                await b1_may_finish.wait()
                b1_done.set()
            return name

        async def branch(prefix: str) -> list[str]:
            try:
                return [await act(f"{prefix}1"), await act(f"{prefix}2")]
            finally:
                over[prefix].set()  # however the branch ends: returned, raised or cancelled

        @manager.register_workflow
        async def two() -> list[Any]:
            return list(await asyncio.gather(branch("a"), branch("b")))

        return manager, two

    # The first process's lease is short, so the second takes over soon after it stops; the
    # second's is long, so a slow machine does not make it lose the run midway.
    first, two = build(lease_timeout=1.5)
    async with first:
        store = store_of(first)
        original = store.record_step
        failed = asyncio.Event()

        async def failing(step: Any, *, token: str) -> None:
            if step.call_id == "1/1":  # a1's outcome
                failed.set()
                raise sw.SagawayError("simulated: the database refused the write")
            await original(step, token=token)

        store.record_step = failing  # type: ignore[method-assign]
        await first.workflow(two).execute(idempotency_key="two-1")
        await asyncio.wait_for(failed.wait(), 10)
        b1_may_finish.set()  # b1 ends after a1's outcome failed to be written
        await asyncio.wait_for(b1_done.wait(), 10)
        # Each branch would go on to its second activity; once both branches are over, whatever
        # they were going to run has run.
        await asyncio.wait_for(asyncio.gather(over["a"].wait(), over["b"].wait()), 10)
        assert sorted(runs) == ["a1", "b1"]  # neither a2 nor b2 ran past an unwritten outcome
    assert sorted(runs) == ["a1", "b1"]  # nor during the shutdown

    second, _ = build(lease_timeout=30.0)
    async with second:
        result = await second.get_workflow("two-1").result(timeout=20)
    assert result == [["a1", "a2"], ["b1", "b2"]]
    assert sorted(runs) == ["a1", "a1", "a2", "b1", "b1", "b2"]


async def test_unusable_keys_and_sleeps_are_refused(db_url: str) -> None:
    manager = make_manager(db_url)

    @manager.register_workflow
    async def nap(seconds: float) -> None:
        await manager.sleep(seconds)

    async with manager:
        with pytest.raises(ValueError, match="NUL"):
            await manager.workflow(nap, 0.0).execute(idempotency_key="bad\x00key")
        for seconds in (float("inf"), float("nan"), -1.0):
            with pytest.raises(ValueError, match="finite number >= 0"):
                await manager.sleep(seconds)
        assert await manager.list_workflows() == []


async def test_idempotency_key_is_stable_across_retries(db_url: str) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock=clock)
    seen: list[tuple[str, int]] = []

    @manager.register_activity(retry=sw.RetryPolicy(initial_interval=1.0, maximum_attempts=3))
    def pay(amount: int) -> None:  # sync: runs in the thread pool
        info = sw.activity_info()
        seen.append((info.idempotency_key, info.attempt))
        if info.attempt == 1:
            raise sw.RetryableError("timeout talking to the processor")

    @manager.register_workflow
    async def flow() -> None:
        await manager.activity(pay, 10).execute_wait()

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="order-9")
        await clock.wait_for_sleep(1.0)
        await clock.advance(1.0)
        await handle.result(timeout=10)
    assert seen == [("order-9/1", 1), ("order-9/1", 2)]


async def test_custom_error_marshaler_carries_domain_errors(db_url: str) -> None:
    class InsufficientBalance(Exception):
        def __init__(self, missing: int) -> None:
            super().__init__(f"missing {missing}")
            self.missing = missing

    class Marshaler:
        def marshal_completable_error(self, err: BaseException) -> bytes | None:
            if isinstance(err, InsufficientBalance):
                return str(err.missing).encode()
            return sw.DefaultErrorMarshaler().marshal_completable_error(err)

        def unmarshal_completable_error(self, data: bytes) -> BaseException:
            if data.isdigit():
                return InsufficientBalance(int(data))
            return sw.DefaultErrorMarshaler().unmarshal_completable_error(data)

    manager = make_manager(db_url, error_marshaler=Marshaler())

    @manager.register_activity
    async def debit() -> None:
        raise InsufficientBalance(500)

    @manager.register_workflow
    async def flow() -> None:
        await debit()

    async with manager:
        with pytest.raises(InsufficientBalance) as info:
            await manager.workflow(flow).execute_get()
    assert info.value.missing == 500


async def test_terminate_stops_a_running_workflow_at_once(db_url: str) -> None:
    manager = make_manager(db_url)
    entered = asyncio.Event()

    @manager.register_activity
    async def block() -> None:
        entered.set()
        await asyncio.Event().wait()

    @manager.register_workflow
    async def flow() -> None:
        await block()

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="c")
        await entered.wait()
        assert await manager.terminate("c", "stuck")  # the activity never ends: no waiting
        with pytest.raises(sw.WorkflowCancelled):
            await handle.result(timeout=10)
        assert await handle.status() is sw.WorkflowStatus.TERMINATED
        assert not await handle.cancel()
        assert not await manager.terminate("c")


async def test_short_durable_sleep_stays_in_the_worker(db_url: str) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock=clock)

    @manager.register_workflow
    async def nap() -> str:
        await manager.sleep(0.5)  # under a second: sleeps in the worker, still recorded
        return "rested"

    async with manager:
        handle = await manager.workflow(nap).execute()
        await clock.wait_for_sleep(0.5)
        assert await handle.status() is sw.WorkflowStatus.RUNNING
        await clock.advance(0.5)
        assert await handle.result(timeout=10) == "rested"
        steps = (await handle.describe()).steps
    assert [(s.kind, s.status) for s in steps] == [(sw.StepKind.SLEEP, sw.StepStatus.COMPLETED)]


async def test_queue_limits_concurrency(db_url: str) -> None:
    manager = make_manager(db_url, queues={"payment": sw.Queue(concurrency=2)})
    active = {"now": 0, "max": 0}

    @manager.register_activity(queue="payment")
    async def charge(i: int) -> int:
        active["now"] += 1
        active["max"] = max(active["max"], active["now"])
        await asyncio.sleep(0.01)
        active["now"] -= 1
        return i

    @manager.register_workflow
    async def flow(i: int) -> int:
        return await charge(i)

    async with manager:
        results = await asyncio.gather(*(manager.workflow(flow, i).execute_get() for i in range(8)))
    assert sorted(results) == list(range(8))
    assert active["max"] == 2


async def _wait_status(handle: sw.WorkflowHandle[Any], status: sw.WorkflowStatus) -> None:
    await _wait_for(handle, lambda d: d.status is status)


async def _wait_for(handle: sw.WorkflowHandle[Any], predicate: Any, timeout: float = 10.0) -> None:
    async def poll() -> None:
        while True:
            try:
                if predicate(await handle.describe()):
                    return
            except sw.WorkflowNotFound:
                pass
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)


async def test_workers_run_only_their_task_queues(db_url: str) -> None:
    ran_by: dict[str, str] = {}
    billing = make_manager(db_url)
    billing.task_queues = frozenset({"billing"})
    general = make_manager(db_url)
    general.task_queues = frozenset({"default"})
    client = make_manager(db_url)
    for label, manager in (("billing", billing), ("general", general), ("client", client)):

        def define(m: sw.Manager, who: str) -> None:
            @m.register_workflow(name="invoice", task_queue="billing")
            async def invoice(n: int) -> str:
                ran_by[f"invoice-{n}"] = who
                return who

            @m.register_workflow(name="greet")
            async def greet(n: int) -> str:
                ran_by[f"greet-{n}"] = who
                return who

        define(manager, label)

    async with general, billing, client.connect():
        # Each is started where it must not run: the start hands it over through the database.
        results = await asyncio.gather(
            *(general.workflow("invoice", n).execute_get(timeout=10) for n in range(5)),
            *(billing.workflow("greet", n).execute_get(timeout=10) for n in range(5)),
        )
    assert results == ["billing"] * 5 + ["general"] * 5
