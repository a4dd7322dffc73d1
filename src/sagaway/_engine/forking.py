"""Fork: a new execution, under a new key, that reuses an ended execution's outcomes up to a step.

Like DBOS's ``fork_workflow`` and Temporal's reset: a workflow that failed at step 3 because of a
bug is forked from step 3 once the bug is fixed, and the fork completes it without running steps
1 and 2 again.

Which outcomes are kept. Step N is the workflow's own (top-level) durable call N: call id
``"N"`` (see ``context``). The fork keeps

* every step of top-level calls 1 .. N-1, and
* every step of a branch (a task the workflow spawned: call ids ``"2/1"``, ``"2/1/3"``) that had
  *ended* before step N started (a gather finished before step N is kept whole),

and drops the rest, which runs again. From step 1 nothing is kept, not even a gather that opened
the workflow and ended before step 1 started: the whole workflow runs again. The kept set is
closed under "happened before": a kept step's outcome can only have depended on outcomes the
workflow received before it, and those ended earlier, so they are kept too. A step that ended
after step N started may depend on step N's outcome, which the fork computes anew, so it is
dropped. Times compared are the recorded
ones: the ends of activities, compensations, signals and children's results are the workflow's
completion order (``ExecutionBase.completion_time``), strictly increasing within an execution,
and every step of a branch that ended before top-level step N-1's outcome was received ended
before step N started, whatever the clocks did meanwhile.

What the kept steps published goes with them. A kept ``publish`` step is replayed, not run
again, so the store copies the events, stream items and search attributes it wrote into the fork
(``Store.fork_workflow``, in the fork's transaction): the fork's streams hold the kept items at
the same offsets, then what it publishes itself. What a dropped step published is not copied.

``from_step`` = (last top-level step + 1) keeps every step: the fork resumes where the source
stopped. A larger ``from_step`` is an error.

Only ended executions (COMPLETED, FAILED, CANCELLED, TERMINATED) are forked: forking a live one
would make two executions do the same work. A SUSPENDED execution is live too (the Recovery
Worker retries it): terminate it first.

Compensations. Those the source ran from step N on (a refund after step 3 failed) are dropped
with everything else from step N on, but their effects happened, and may have undone what kept
steps did: a fork reusing "charged" after the refund would ship against a refunded payment. So
a fork that drops a compensation the source ran (any recorded attempt, completed or not: part
of it may have happened) and keeps a step with effects (an activity, a compensation, a child's
start) is refused with ``ForkRefused``, which names them, unless forced. A fork that keeps no
such step (from step 1: the whole saga runs again) is not refused; neither is one that keeps
the compensations (they are replayed, as the source recorded them).

The fork's key space names its run (``keys.key_space(..., replacing=True)``): the activities it
runs again and the children it starts anew get idempotency keys that no earlier execution used,
not even one under the same key that was purged; kept steps keep their outcomes (a kept child
start keeps its child, which stays the source's child).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Protocol

from sagaway import _sealed, errors, serialization
from sagaway._engine import audit, keys, new_executions
from sagaway._engine.cancellation import is_cancel_step
from sagaway._engine.options import EngineOptions
from sagaway._engine.text_checks import check_key
from sagaway.channel import Channel
from sagaway.clock import Clock
from sagaway.randomness import new_run_id
from sagaway.states import StepKind, StepStatus, WorkflowStatus
from sagaway.store.base import Store
from sagaway.store.output_verbs import all_outputs
from sagaway.store.records import ForkRequest, OutputRecord, StepRecord, WorkflowRecord

_TOP_LEVEL = re.compile(r"[1-9][0-9]*")
_COMPLETION_ORDERED = frozenset(
    {StepKind.ACTIVITY, StepKind.COMPENSATION, StepKind.CHILD_RESULT, StepKind.SIGNAL}
)
_FINAL = frozenset({StepStatus.COMPLETED, StepStatus.FAILED})
_EFFECTS = frozenset({StepKind.ACTIVITY, StepKind.COMPENSATION, StepKind.CHILD})
"""Kinds of step whose work a compensation may undo."""

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class ForkPlan:
    """What a fork of an ended workflow keeps and what it runs again (see ``Manager.fork``)."""

    source_key: str
    source_run_id: str
    source_status: WorkflowStatus
    from_step: int
    """The first top-level step the fork runs again."""
    last_step: int
    """The last top-level step the source recorded (0: none)."""
    kept: tuple[str, ...]
    """Call ids of the recorded steps the fork reuses, in the source's order."""
    dropped: tuple[str, ...]
    """Call ids of the source's steps the fork does not reuse (they run again if reached)."""
    compensated: tuple[str, ...]
    """Dropped compensations the source ran (any recorded attempt, completed or not): their
    effects happened, or may have, in the source."""

    @property
    def kept_top_level(self) -> tuple[int, int] | None:
        """The range of top-level steps kept (``(1, from_step - 1)``), None if none is."""
        return (1, self.from_step - 1) if self.from_step > 1 else None


def top_level(call_id: str) -> int | None:
    """The number of a top-level call id (``"3"`` -> 3), None for a branch's (``"2/1"``)."""
    return int(call_id) if _TOP_LEVEL.fullmatch(call_id) else None


def plan(source: WorkflowRecord, steps: list[StepRecord], from_step: int) -> ForkPlan:
    """The steps a fork of ``source`` from top-level step ``from_step`` keeps (pure).

    Raises:
        ValueError: ``from_step`` is below 1 or past the step after the last recorded one.
    """
    if isinstance(from_step, bool) or not isinstance(from_step, int):
        raise ValueError(f"from_step must be an integer, not {from_step!r}")
    tops = {n: s for s in steps if (n := top_level(s.call_id)) is not None}
    last = max(tops, default=0)
    if from_step < 1 or from_step > last + 1:
        raise ValueError(
            f"from_step {from_step} is out of range for workflow {source.key!r}: its top-level "
            f"steps are 1-{last}, so from_step must be 1-{last + 1} "
            f"({last + 1} keeps every step and runs on from where it stopped)"
            if last
            else f"from_step {from_step} is out of range for workflow {source.key!r}: it "
            "recorded no step, so from_step must be 1"
        )
    if from_step == last + 1:
        kept = list(steps)
    elif from_step == 1:
        # Nothing: not even a gather that opened the workflow and ended before step 1 started
        # (the whole saga runs again, and a fork from step 1 is never refused).
        kept = []
    else:
        boundary = _boundary(tops, from_step)
        kept = [s for s in steps if _kept(s, from_step, boundary)]
    cancelled = [s.call_id for s in kept if is_cancel_step(s)]
    if cancelled:
        # Kept, it would cancel the fork again at the same call.
        raise ValueError(
            f"step {cancelled[0]} of workflow {source.key!r} recorded its cancellation: fork "
            f"from a step up to {top_level(cancelled[0]) or 'the one that started its branch'}"
            " so that the fork runs past it"
        )
    kept_ids = {s.call_id for s in kept}
    dropped = [s for s in steps if s.call_id not in kept_ids]
    return ForkPlan(
        source_key=source.key,
        source_run_id=source.run_id,
        source_status=source.status,
        from_step=from_step,
        last_step=last,
        kept=tuple(s.call_id for s in kept),
        dropped=tuple(s.call_id for s in dropped),
        compensated=tuple(s.call_id for s in dropped if s.kind is StepKind.COMPENSATION),
    )


def _boundary(tops: dict[int, StepRecord], from_step: int) -> float:
    """A time at or before which a branch's step ended before top-level step ``from_step``
    started: that step's start, or the latest completion the workflow had received before it
    (recorded completions are strictly ordered even when the clock did not move)."""
    start = min(s.started_at for n, s in tops.items() if n >= from_step)
    received = [
        s.ended_at
        for n, s in tops.items()
        if n < from_step
        and s.ended_at is not None
        and s.kind in _COMPLETION_ORDERED
        and s.status in _FINAL
        and not (s.kind is StepKind.SIGNAL and s.status is StepStatus.FAILED)  # a timeout's now
    ]
    return max([start, *received])


def _kept(step: StepRecord, from_step: int, boundary: float) -> bool:
    number = top_level(step.call_id)
    if number is not None:
        return number < from_step
    return step.status in _FINAL and step.ended_at is not None and step.ended_at <= boundary


async def prepare(store: Store, key: str, from_step: int, *, force: bool = False) -> ForkPlan:
    """The plan of a fork of the workflow under ``key`` from ``from_step``.

    Raises:
        WorkflowNotEnded: it is live (SUSPENDED included), or a kept step started a child that
            has not ended (the fork would wait for a child whose end wakes only its parent).
        WorkflowNotFound: no workflow has ``key``, or a kept step started a child that a purge
            has deleted (its end is gone).
        ForkRefused: it ran compensations the fork drops while it keeps steps with effects
            (see the module's docstring), and ``force`` is not set.
        ValueError: ``from_step`` is out of range.
    """
    source = await store.get_workflow(key)
    if source is None:
        raise errors.WorkflowNotFound(key)
    if not source.status.ended:
        raise errors.WorkflowNotEnded(
            key,
            source.status.value,
            f"workflow {key!r} is {source.status.value}: only an ended workflow can be forked "
            "(a live one would run twice); end it first with `sagaway terminate "
            f"{key}` (or manager.terminate), then fork it",
        )
    steps = await store.load_steps(source.run_id)
    result = plan(source, steps, from_step)
    kept = set(result.kept)
    published: list[OutputRecord] = []
    if any(s.kind is StepKind.PUBLISH and s.call_id in kept for s in steps):
        outputs = await all_outputs(store, source.run_id)
        published = [o for o in outputs if o.call_id in kept]
    _require_resealable(source, [s for s in steps if s.call_id in kept], published)
    undone = [s for s in steps if s.call_id in kept and s.kind in _EFFECTS]
    if result.compensated and undone:
        _refuse_or_warn(result, steps, force=force)
    await _require_kept_children(store, key, steps, kept)
    return result


def _require_resealable(
    source: WorkflowRecord, kept: list[StepRecord], published: list[OutputRecord]
) -> None:
    """``PayloadError`` if a payload the fork copies is still sealed for the source's run: a
    fork seals them again for its own run, and copied as they are they would never open there.
    Either this process has no codec (or lacks a key), or its codec refused the payload (one
    copied into the source from elsewhere). ``published``: the events and stream items the
    kept steps wrote, which the fork copies too."""
    found: list[tuple[str, str | None]] = [("arguments", source.args)]
    found += [(f"step {s.call_id}'s result", s.result) for s in kept]
    found += [(f"step {s.call_id}'s error", s.error) for s in kept]
    found += [(f"{o.kind} {o.name!r} value (step {o.call_id})", o.value) for o in published]
    for what, text in found:
        if not _sealed.is_bound(text):
            continue
        assert text is not None
        key_id = _sealed.sealed_error(text, what).key_id
        reason = _sealed.unopened_reason(text)
        if reason is not None:
            raise errors.PayloadKeyError(
                f"cannot fork workflow {source.key!r}: its {what} cannot be opened here, and a "
                f"fork seals it again for its new run: {reason}",
                key_id,
            )
        raise errors.PayloadKeyError(
            f"cannot fork workflow {source.key!r}: its {what} is encrypted and bound to its "
            "run, and a fork seals it again for the new run, which needs the codec and its "
            "keys: fork from a process given them (Manager(codec=...), sagaway fork "
            f"--codec-key-file PATH) ({_sealed.note(text)})",
            key_id,
        )


def _refuse_or_warn(result: ForkPlan, steps: list[StepRecord], *, force: bool) -> None:
    """Raise ``ForkRefused`` naming the compensations the fork drops (unless ``force``: then a
    warning is logged)."""
    by_id = {s.call_id: s for s in steps}
    ran = ", ".join(
        f"step {c} {by_id[c].name} ({by_id[c].status.value})" for c in result.compensated
    )
    top = result.kept_top_level
    kept = (
        "the kept steps"
        if top is None
        else f"step {top[0]}"
        if top[0] == top[1]
        else f"steps {top[0]}-{top[1]}"
    )
    message = (
        f"workflow {result.source_key!r} ran compensations that a fork from step "
        f"{result.from_step} drops: {ran}; they may have undone what {kept} did, and the "
        "fork would reuse those outcomes. Fork from step 1 to run the whole saga "
        "again, or force the fork (force=True, sagaway fork --force) if its steps can tell "
        "from their own data what must be redone"
    )
    if not force:
        raise errors.ForkRefused(result.source_key, result.from_step, result.compensated, message)
    logger.warning("fork forced: %s", message, extra={"action": "fork"})


async def _require_kept_children(
    store: Store, key: str, steps: list[StepRecord], kept: set[str]
) -> None:
    """``_require_child_ended`` for each child start among the ``kept`` ``steps``."""
    for step in steps:
        if step.call_id in kept and step.kind is StepKind.CHILD and step.result is not None:
            await _require_child_ended(store, key, step)


async def _require_child_ended(store: Store, key: str, step: StepRecord) -> None:
    assert step.result is not None
    child_key = str(serialization.load_json(step.result, "child key"))
    child = await store.get_workflow(child_key)
    if child is None:
        # A purge took it (its parent, the source, had ended, and nothing live read it): kept,
        # its start would have the fork read an end that is gone, and stay SUSPENDED.
        raise errors.WorkflowNotFound(
            child_key,
            f"step {step.call_id} of workflow {key!r} started child workflow {child_key!r}, "
            "which a purge has deleted: the fork would keep that step and read the end of a "
            "child that is gone; fork from an earlier step (the child is then started anew)",
        )
    if not child.status.ended:
        raise errors.WorkflowNotEnded(
            child_key,
            child.status.value,
            f"step {step.call_id} of workflow {key!r} started child workflow {child_key!r}, "
            f"which is {child.status.value}: the fork would keep that step and wait for a child "
            "that is not its own; wait for the child to end (or terminate it), or fork from an "
            "earlier step",
        )


class Engine(Protocol):
    """What creating a fork uses of the Engine (``Engine.fork`` calls it)."""

    store: Store
    clock: Clock
    options: EngineOptions
    channel: Channel

    def wake_recovery(self) -> None: ...


async def create(
    engine: Engine,
    key: str,
    *,
    from_step: int,
    new_key: str,
    force: bool,
    reason: str | None = None,
) -> tuple[WorkflowRecord, ForkPlan]:
    """Create a PENDING execution under ``new_key`` that reuses the outcomes of the ended
    workflow ``key`` before its step ``from_step`` (see ``forking``); audited."""
    check_key(new_key, "new_key")
    reason = audit.check_reason(reason)
    plan = await prepare(engine.store, key, from_step, force=force)
    note = audit.note(
        "fork",
        reason,
        source_key=key,
        source_run_id=plan.source_run_id,
        from_step=from_step,
        force=force or None,
    )
    run_id = new_run_id()
    result = await engine.store.fork_workflow(
        ForkRequest(
            source_run_id=plan.source_run_id,
            run_id=run_id,
            key=new_key,
            # Named by its run: re-run calls never reuse an idempotency key (see forking).
            key_space=keys.key_space(new_key, run_id, replacing=True),
            call_ids=tuple(plan.kept),
            code_version=engine.options.code_version,
        ),
        now=engine.clock.now(),
        audit=note,
    )
    if result is None:
        # A purge took the source, or a child whose start the fork keeps, since prepare looked:
        # looking again names what is gone.
        steps = await engine.store.load_steps(plan.source_run_id)
        await _require_kept_children(engine.store, key, steps, set(plan.kept))
        raise errors.WorkflowNotFound(key)
    record = result.record
    if not result.created:
        raise errors.WorkflowAlreadyExists(
            new_key,
            record.status.value,
            f"cannot fork {key!r} to {new_key!r}: workflow {new_key!r} already exists "
            f"({record.status.value}); choose a new key",
        )
    new_executions.started(engine.channel, record.run_id, new_key, record.name)
    engine.wake_recovery()  # a Worker of this process may take it at once
    return record, plan
