"""sagaway.steps: the order rules of a saga definition, and how it runs, on every backend."""

from __future__ import annotations

from typing import Any

import pytest

import sagaway as sw
from sagaway import steps
from sagaway.testing import FakeClock


class Refused(sw.CompletableError):
    """A service refused the step."""


# --------------------------------------------------------------------------- validation


def test_a_valid_definition_keeps_its_steps_in_order() -> None:
    definition = steps.SagaDefinition(
        [
            steps.Compensable("order.create", "order.cancel"),
            steps.Compensable("stock.reserve", "stock.release"),
            steps.Pivot("card.charge"),
            steps.Retryable("ship.arrange"),
            steps.Retryable("mail.confirm"),
        ]
    )
    assert [s.kind for s in definition.steps] == [
        "compensable", "compensable", "pivot", "retryable", "retryable",
    ]  # fmt: skip
    assert definition.pivot is not None and definition.pivot.label == "card.charge"
    assert [s.compensation for s in definition.compensable] == ["order.cancel", "stock.release"]
    assert all(s.retry == steps.UNTIL_SUCCESS for s in definition.retryable)
    assert "pivot:card.charge" in repr(definition)
    # No pivot: compensable steps, then retryable ones, is a valid saga too.
    steps.SagaDefinition([steps.Compensable("a", "undo_a"), steps.Retryable("b")])


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        ([], "at least one step"),
        (
            [steps.Pivot("charge"), steps.Pivot("refund")],
            "step 2 ('refund') is a second pivot; a saga has at most one point of no return, and "
            "'charge' is already it",
        ),
        (
            [steps.Pivot("charge"), steps.Compensable("reserve", "release")],
            "compensable step 'reserve' (step 2) comes after the pivot 'charge'",
        ),
        (
            [steps.Retryable("ship"), steps.Pivot("charge")],
            "pivot 'charge' (step 2) comes after retryable step 'ship'",
        ),
        (
            [
                steps.Compensable("a", "undo_a"),
                steps.Retryable("ship"),
                steps.Compensable("b", "undo_b"),
            ],
            "compensable step 'b' (step 3) comes after retryable step 'ship', which cannot be "
            "compensated",
        ),
    ],
)
def test_steps_in_a_wrong_order_are_refused_with_the_rule(
    definition: list[steps.Step], message: str
) -> None:
    with pytest.raises(steps.InvalidSagaDefinition) as info:
        steps.SagaDefinition(definition)
    assert message in str(info.value)
    assert isinstance(info.value, sw.SagawayError) and isinstance(info.value, ValueError)


def test_malformed_steps_are_refused() -> None:
    with pytest.raises(TypeError, match=r"step 2 is 'charge'; use sagaway.steps.Compensable"):
        steps.SagaDefinition([steps.Pivot("x"), "charge"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="must allow unlimited attempts"):
        steps.Retryable("ship", retry=sw.RetryPolicy(maximum_attempts=5))
    with pytest.raises(TypeError, match="compensation of compensable step 'reserve'"):
        steps.Compensable("reserve", 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout must be > 0"):
        steps.Pivot("charge", timeout=0)


# --------------------------------------------------------------------------- running


def make_manager(db_url: str, **options: Any) -> sw.Manager:
    options.setdefault("poll_interval", 0.05)
    return sw.Manager(db_url, **options)


class World:
    """What the services did, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.held: set[str] = set()
        self.fail: dict[str, int] = {}
        """step name -> how many times it raises RetryableError before succeeding."""
        self.refuse: set[str] = set()


def register(manager: sw.Manager, world: World) -> None:
    def step(name: str) -> None:
        async def do(order: str) -> str:
            world.calls.append(name)
            if world.fail.get(name, 0) > 0:
                world.fail[name] -= 1
                raise sw.RetryableError(f"{name} timed out")
            if name in world.refuse:
                raise Refused(f"{name} refused", code="REFUSED")
            world.held.add(name)
            return f"{name}:{order}"

        async def undo(order: str) -> None:
            # Registered before the step ran: does nothing when the step never took effect.
            if name in world.held:
                world.held.discard(name)
                world.calls.append(f"undo {name}")
            else:
                world.calls.append(f"undo {name} (nothing to undo)")

        manager.register_activity(name=name)(do)
        manager.register_activity(name=f"undo_{name}")(undo)

    for name in ("create", "reserve", "charge", "ship", "confirm"):
        step(name)


SAGA = steps.SagaDefinition(
    [
        steps.Compensable("create", "undo_create"),
        steps.Compensable("reserve", "undo_reserve"),
        steps.Pivot("charge"),
        steps.Retryable("ship"),
        steps.Retryable("confirm"),
    ]
)


def add_workflow(manager: sw.Manager) -> None:
    @manager.register_workflow(name="order")
    async def order(order_id: str) -> list[Any]:
        return await SAGA.run(manager, order_id)


async def test_the_whole_saga_runs_in_order_and_returns_the_results(db_url: str) -> None:
    manager, world = make_manager(db_url), World()
    register(manager, world)
    add_workflow(manager)
    async with manager:
        result = await manager.workflow("order", "o-1").execute_get(idempotency_key="o-1")
    assert result == ["create:o-1", "reserve:o-1", "charge:o-1", "ship:o-1", "confirm:o-1"]
    assert world.calls == ["create", "reserve", "charge", "ship", "confirm"]


async def test_a_failing_compensable_step_compensates_in_reverse(db_url: str) -> None:
    manager, world = make_manager(db_url), World()
    world.refuse.add("reserve")
    register(manager, world)
    add_workflow(manager)
    async with manager:
        handle = await manager.workflow("order", "o-2").execute(idempotency_key="o-2")
        with pytest.raises(Refused, match="reserve refused"):
            await handle.result()
        described = await handle.describe()
    # The failing step's own compensation was registered before it ran: it runs, and finds
    # nothing to undo; then the earlier step is undone. Nothing after the failure ran.
    assert world.calls == [
        "create",
        "reserve",
        "undo reserve (nothing to undo)",
        "undo create",
    ]
    assert described.status is sw.WorkflowStatus.FAILED
    assert [s.name for s in described.steps if s.kind is sw.StepKind.COMPENSATION] == [
        "undo_reserve",
        "undo_create",
    ]


async def test_a_failing_pivot_compensates_the_compensable_steps_in_reverse(db_url: str) -> None:
    manager, world = make_manager(db_url), World()
    world.refuse.add("charge")
    register(manager, world)
    add_workflow(manager)
    async with manager:
        with pytest.raises(Refused):
            await manager.workflow("order", "o-3").execute_get(idempotency_key="o-3")
    assert world.calls == ["create", "reserve", "charge", "undo reserve", "undo create"]


async def test_a_retryable_step_failing_twice_is_retried_not_compensated(db_url: str) -> None:
    clock = FakeClock()
    manager, world = make_manager(db_url, clock=clock), World()
    world.fail["ship"] = 2
    register(manager, world)
    add_workflow(manager)
    async with manager:
        handle = await manager.workflow("order", "o-4").execute(idempotency_key="o-4")
        # UNTIL_SUCCESS backs off 1 s, then 2 s: skip that time instead of sleeping it.
        await clock.wait_for_sleep(1.0)
        await clock.advance(1.0)
        await clock.wait_for_sleep(2.0)
        await clock.advance(2.0)
        result = await handle.result(timeout=10)
        described = await handle.describe()
    assert result[3] == "ship:o-4"
    assert world.calls == ["create", "reserve", "charge", "ship", "ship", "ship", "confirm"]
    assert not [s for s in described.steps if s.kind is sw.StepKind.COMPENSATION]
    ship = next(s for s in described.steps if s.name == "ship")
    assert ship.attempts == 3 and ship.status is sw.StepStatus.COMPLETED
    assert described.status is sw.WorkflowStatus.COMPLETED


async def test_a_business_error_after_the_pivot_suspends_instead_of_failing(db_url: str) -> None:
    manager, world = make_manager(db_url, recovery_interval=3600), World()
    world.refuse.add("ship")
    register(manager, world)
    add_workflow(manager)
    async with manager:
        handle = await manager.workflow("order", "o-5").execute(idempotency_key="o-5")
        for _ in range(400):
            if await handle.status() is sw.WorkflowStatus.SUSPENDED:
                break
            await manager.clock.sleep(0.01)
        described = await handle.describe()
    assert described.status is sw.WorkflowStatus.SUSPENDED
    assert described.error is not None
    assert (
        "retryable step 'ship' failed with a completable error after the pivot"
        in (described.error["message"])
    )
    assert world.calls == ["create", "reserve", "charge", "ship"]  # nothing compensated


async def test_unregistered_steps_fail_before_anything_runs(sqlite_url: str) -> None:
    manager, world = make_manager(sqlite_url, recovery_interval=3600), World()
    register(manager, world)
    typo = steps.SagaDefinition([steps.Compensable("create", "undo_creat"), steps.Pivot("charge")])

    @manager.register_workflow(name="typo")
    async def with_typo(order_id: str) -> list[Any]:
        return await typo.run(manager, order_id)

    async with manager:
        handle = await manager.workflow("typo", "o-6").execute(idempotency_key="o-6")
        for _ in range(400):
            if await handle.status() is sw.WorkflowStatus.SUSPENDED:
                break
            await manager.clock.sleep(0.01)
        described = await handle.describe()
    assert described.error is not None and described.error["type"].endswith("NotRegistered")
    assert "undo_creat" in described.error["message"]
    assert world.calls == []


async def test_run_outside_a_workflow_is_an_error(sqlite_url: str) -> None:
    manager = make_manager(sqlite_url)
    with pytest.raises(sw.SagawayError, match="inside a function registered with"):
        await SAGA.run(manager, "o-7")
