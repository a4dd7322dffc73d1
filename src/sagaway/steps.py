"""Step kinds of a saga made explicit: compensable steps, one pivot, retryable steps.

The steps of a saga fall into three kinds, and the kinds fix their order:

* **compensable** steps can be undone by a compensation (create the order / cancel it, reserve
  stock / release it). They come first, because they are the ones that may fail and are cheap
  to undo.
* the **pivot** is the point of no return (charge the card). If it fails, the compensable steps
  before it are compensated; once it succeeds, nothing is undone any more.
* **retryable** steps come after the pivot and are retried until they succeed (arrange
  shipping, send the confirmation mail); they are never compensated, so they must not be able to
  fail for good, and must be idempotent because they run again after every transient failure.

:class:`SagaDefinition` checks that order when it is built and runs the steps inside a workflow,
each as a durable activity call, with a core :class:`sagaway.Saga` holding the compensations::

    ORDER = steps.SagaDefinition([
        steps.Compensable(create_order, cancel_order),
        steps.Compensable(reserve_stock, release_stock),
        steps.Pivot(charge_card),
        steps.Retryable(arrange_shipping),
    ])

    @manager.register_workflow
    async def place_order(order: Order) -> None:
        await ORDER.run(manager, order)

Every step and every compensation is called with the arguments given to ``run``: the saga's
whole business input. A compensation is registered **before** its step runs, so it also runs
when the step itself failed, or failed half-way, or timed out having perhaps taken effect:
compensations must therefore find what to undo from the business key (``WHERE saga = ? AND
state = 'RESERVED'``) and do nothing when there is nothing to undo. That is the only safe way,
because a step that failed with an unknown outcome (a timeout) may or may not have taken effect.
Flows that need a step's result in a later step or in a compensation are written with
:class:`sagaway.Saga` directly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from sagaway import errors, retry
from sagaway import saga as saga_mod
from sagaway._engine.executor import current_execution

if TYPE_CHECKING:
    from sagaway.manager import Manager

ActivityRef: TypeAlias = Callable[..., Any] | str
"""A registered activity: the function returned by ``register_activity``, or its name."""

UNTIL_SUCCESS = retry.RetryPolicy(
    initial_interval=1.0, backoff_coefficient=2.0, maximum_interval=60.0, maximum_attempts=0
)
"""Default policy of retryable steps: unlimited attempts, backing off up to a minute."""


def _label(ref: ActivityRef) -> str:
    if isinstance(ref, str):
        return ref
    return str(getattr(ref, "__qualname__", None) or getattr(ref, "__name__", None) or ref)


def _check_ref(ref: object, what: str) -> None:
    if not (isinstance(ref, str) or callable(ref)):
        raise TypeError(f"{what} must be a registered activity (function or name), got {ref!r}")
    if isinstance(ref, str) and not ref:
        raise ValueError(f"{what} must not be an empty name")


@dataclasses.dataclass(frozen=True)
class _Step:
    activity: ActivityRef
    """The step's activity (registered function or name)."""
    _: dataclasses.KW_ONLY
    retry: retry.RetryPolicy | None = None
    """Retry policy of the step's activity; None: the policy it was registered with."""
    timeout: float | None = None
    """Seconds per attempt; None: the timeout it was registered with."""
    name: str | None = None
    """Label in error messages; defaults to the activity's name."""

    kind: ClassVar[str] = "step"

    def __post_init__(self) -> None:
        _check_ref(self.activity, f"the activity of a {self.kind} step")
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError(f"{self.kind} step {self.label!r}: timeout must be > 0 seconds")

    @property
    def label(self) -> str:
        return self.name or _label(self.activity)


@dataclasses.dataclass(frozen=True)
class Compensable(_Step):
    """A step that can be undone: ``Compensable(activity, compensation, retry=..., timeout=...)``.

    The compensation is called with the same arguments as the step. It is registered before the
    step runs, so it also runs when the step itself fails or times out, and must then do nothing
    if the step never took effect.
    """

    compensation: ActivityRef
    """Undoes the step; idempotent, commutative, and a no-op when the step never happened."""

    kind: ClassVar[str] = "compensable"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_ref(self.compensation, f"the compensation of compensable step {self.label!r}")


@dataclasses.dataclass(frozen=True)
class Pivot(_Step):
    """The point of no return: if it fails the saga is compensated, once done it never is."""

    kind: ClassVar[str] = "pivot"


@dataclasses.dataclass(frozen=True)
class Retryable(_Step):
    """A step after the pivot, retried until it succeeds and never compensated.

    Transient failures are signalled with ``sagaway.RetryableError`` (retried by ``retry``,
    unlimited attempts); any other unexpected error suspends the workflow and the Recovery
    Worker runs the step again later. A completable (business) error cannot be honoured after
    the pivot: the workflow is suspended with an explanation instead of ending FAILED.
    """

    retry: retry.RetryPolicy | None = dataclasses.field(default=UNTIL_SUCCESS, kw_only=True)
    """Must allow unlimited attempts (``maximum_attempts=0``); default :data:`UNTIL_SUCCESS`."""

    kind: ClassVar[str] = "retryable"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.retry is None:
            object.__setattr__(self, "retry", UNTIL_SUCCESS)
        elif self.retry.maximum_attempts != 0:
            raise ValueError(
                f"retryable step {self.label!r}: its retry policy must allow unlimited attempts "
                f"(maximum_attempts=0), got maximum_attempts={self.retry.maximum_attempts}; a "
                "step after the pivot cannot give up, because nothing before it will be undone"
            )


Step: TypeAlias = Compensable | Pivot | Retryable


class InvalidSagaDefinition(errors.SagawayError, ValueError):
    """The steps of a saga definition are not in a valid order."""


class SagaDefinition:
    """Compensable steps, then at most one pivot, then retryable steps; checked when built.

    Args:
        steps: the steps in the order they run.

    Raises:
        InvalidSagaDefinition: the order breaks a rule: no steps, two pivots, a compensable
            step after the pivot or after a retryable step, a retryable step before the pivot.
        TypeError: an element is not a ``Compensable``, ``Pivot`` or ``Retryable``.
    """

    def __init__(self, steps: Sequence[Step]) -> None:
        steps = list(steps)
        if not steps:
            raise InvalidSagaDefinition("a saga definition needs at least one step")
        pivot: Pivot | None = None
        first_retryable: Retryable | None = None
        for position, step in enumerate(steps, 1):
            if not isinstance(step, Compensable | Pivot | Retryable):
                raise TypeError(
                    f"step {position} is {step!r}; use sagaway.steps.Compensable(activity, "
                    "compensation), Pivot(activity) or Retryable(activity)"
                )
            if isinstance(step, Pivot):
                if pivot is not None:
                    raise InvalidSagaDefinition(
                        f"step {position} ({step.label!r}) is a second pivot; a saga has at most "
                        f"one point of no return, and {pivot.label!r} is already it. Make the "
                        "steps after the first pivot Retryable"
                    )
                if first_retryable is not None:
                    raise InvalidSagaDefinition(
                        f"pivot {step.label!r} (step {position}) comes after retryable step "
                        f"{first_retryable.label!r}; retryable steps are never compensated, so "
                        "they belong after the pivot"
                    )
                pivot = step
            elif isinstance(step, Compensable):
                if pivot is not None:
                    raise InvalidSagaDefinition(
                        f"compensable step {step.label!r} (step {position}) comes after the "
                        f"pivot {pivot.label!r}; once the pivot succeeds nothing is undone, so "
                        "move it before the pivot, or make it Retryable"
                    )
                if first_retryable is not None:
                    raise InvalidSagaDefinition(
                        f"compensable step {step.label!r} (step {position}) comes after "
                        f"retryable step {first_retryable.label!r}, which cannot be "
                        "compensated if it fails later; put compensable steps first"
                    )
            elif first_retryable is None:
                first_retryable = step
        self.steps: tuple[Step, ...] = tuple(steps)
        self.pivot = pivot

    def __repr__(self) -> str:
        inner = ", ".join(f"{s.kind}:{s.label}" for s in self.steps)
        return f"SagaDefinition([{inner}])"

    @property
    def compensable(self) -> tuple[Compensable, ...]:
        return tuple(s for s in self.steps if isinstance(s, Compensable))

    @property
    def retryable(self) -> tuple[Retryable, ...]:
        return tuple(s for s in self.steps if isinstance(s, Retryable))

    def _check_registered(self) -> None:
        execution = current_execution()
        if execution is None:
            raise errors.SagawayError(
                "SagaDefinition.run() makes durable calls: await it inside a function "
                "registered with @manager.register_workflow"
            )
        registry = execution.engine.registry
        # Unknown functions fail before the first step, not half-way or at undo time.
        for step in self.steps:
            registry.activity(step.activity)
            if isinstance(step, Compensable):
                registry.activity(step.compensation)

    async def run(self, manager: Manager, /, *args: Any, **kwargs: Any) -> list[Any]:
        """Run the saga inside a workflow; returns the steps' results in order.

        Each step is a durable activity call with ``*args, **kwargs``. When a compensable step
        or the pivot fails with a completable error, the compensations registered so far (the
        failing step's included) run in reverse order, each until it succeeds, and the error is
        re-raised: the workflow ends FAILED. Unexpected errors suspend the workflow without
        compensating, as everywhere in Sagaway; recovery resumes it where it stopped.

        Raises:
            CompletableError: (or the ErrorMarshaler's type) from a compensable step or the
                pivot, after compensation.
            IncompletableError: a retryable step raised a completable error (the workflow is
                suspended: after the pivot the saga can only go forward).
        """
        self._check_registered()
        results: list[Any] = []
        index = 0
        async with saga_mod.Saga() as saga:
            for step in self.steps:
                if isinstance(step, Retryable):
                    break
                if isinstance(step, Compensable):
                    saga.add_compensation(step.compensation, *args, **kwargs)
                call = manager.activity(step.activity, *args, **kwargs)
                results.append(await call.execute_get(retry=step.retry, timeout=step.timeout))
                index += 1
        for step in self.steps[index:]:
            assert isinstance(step, Retryable)
            call = manager.activity(step.activity, *args, **kwargs)
            try:
                results.append(await call.execute_get(retry=step.retry, timeout=step.timeout))
            except Exception as exc:
                execution = current_execution()
                if execution is not None and execution.engine.is_completable(exc):
                    raise errors.IncompletableError(
                        f"retryable step {step.label!r} failed with a completable error after "
                        f"the pivot ({type(exc).__name__}: {exc}); a saga cannot go back once "
                        "its pivot succeeded, so the workflow is suspended for an operator. "
                        "Retryable steps must signal transient failures with RetryableError"
                    ) from exc
                raise
        return results
