"""The ``fork`` building block: the client forks an ended top-level run from one of its steps.

Once the first settle is over, the client forks each top-level workflow whose ``fork_from`` is
and whose run has ended, the others after the final settle (then it settles again):
``manager.fork(key, from_step=N, new_key="<key>-fork", force=...)``, under the fault plan
(``fork_workflow`` is a store write faults are aimed at; a retried fork whose first try
committed finds its fork in place). ``N`` is ``1 + fork_from % (last + 1)``, ``last`` the
source's last top-level step: any step, or one past the last (keep everything). The signals the
source was sent are sent to the fork too (a dropped receive waits for a new one).

What the fork call must answer, from the source as the observer reads it just before:

- ``WorkflowNotEnded`` exactly when the source is live (WAITING, SUSPENDED), or a kept step
  started a child that is still live;
- ``ForkRefused`` (without ``force``) when the fork drops a compensation the source recorded and
  keeps a step with effects: required when a dropped compensation is a top-level call (a saga's
  compensations are) and a top-level step before ``N`` is an activity, compensation or child
  start; never when nothing is dropped or nothing is kept (``N`` = 1);
- ``WorkflowNotFound`` only when a purge deleted the source, or a child a kept step started
  (``settings.purge``): a fork keeping the start of a purged child would read an end that is
  gone, and stay SUSPENDED with ``WorkflowNotFound`` (a soak found it on SQLite);
- otherwise a new run under the new key. A refused fork creates nothing under that key.

The checks (``check``): the fork's run ends as the model says (the same program, the signals
it was sent, the ends of the source's children whose starts it kept; ``invariants`` read its
outcome and compensations like any run's, where a kept step counts as committed and a kept
compensation as run); no activity or compensation of a kept step executes in the fork
(its recorded outcome is replayed); the steps it runs anew run under idempotency keys none of
the source's activities used (and the general key check: one key per logical call).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from typing import TYPE_CHECKING

import sagaway as sw
from sagaway._engine import forking
from sagaway._engine.cancellation import is_cancel_step
from sagaway.states import StepKind
from tests.generative import talking
from tests.generative.program import TopLevel

if TYPE_CHECKING:
    from sagaway.store.records import StepRecord, WorkflowRecord
    from tests.generative.driver import Driver
    from tests.generative.world import RunInfo

SUFFIX = "-fork"
"""The fork of ``wf0`` is ``wf0-fork``."""
_EFFECTS = frozenset({StepKind.ACTIVITY, StepKind.COMPENSATION, StepKind.CHILD})


@dataclasses.dataclass
class Forked:
    """One fork the client asked for, and what came of it."""

    top: TopLevel
    source_run: str | None
    from_step: int
    outcome: str
    """forked, refused, not_ended, not_found, or ``invalid: <message>``."""
    run_id: str | None = None
    kept: tuple[str, ...] = ()
    """Call ids of the source's steps the fork reuses (``forking.plan``)."""
    kept_children: tuple[str, ...] = ()
    """Keys of the source's children whose starts the fork kept: it reads their ends."""


async def fork_all(driver: Driver, *, last: bool) -> bool:
    """Fork the top-level workflows to be forked: once the first settle is over those whose
    run has ended, and (``last``) after the final settle the others; True if a fork was
    created (it runs: settle again)."""
    assert driver.observer is not None
    created = False
    done = {f.top.key for f in driver.forked}
    for top in driver.scenario.workflows:
        if top.fork_from is None or top.key not in driver.top_runs or top.key in done:
            continue
        source = await driver.observer.get_workflow(top.key)
        if not last and source is not None and not source.status.ended:
            continue  # perhaps it ends later
        forked = await _fork(driver, top)
        driver.forked.append(forked)
        created |= forked.run_id is not None
    return created


async def _fork(driver: Driver, top: TopLevel) -> Forked:
    observer = driver.observer
    assert observer is not None and top.fork_from is not None
    new_key = top.key + SUFFIX
    source = await observer.get_workflow(top.key)
    steps = [] if source is None else await observer.load_steps(source.run_id)
    last = max((n for s in steps if (n := forking.top_level(s.call_id)) is not None), default=0)
    from_step = 1 + top.fork_from % (last + 1)

    async def op(manager: sw.Manager) -> str:
        existing = await observer.get_workflow(new_key)
        if existing is not None:
            return existing.run_id  # a retried fork whose first try committed
        try:
            handle = await manager.fork(
                top.key, from_step=from_step, new_key=new_key, force=top.fork_force
            )
        except sw.ForkRefused:
            return "refused"
        except sw.WorkflowNotEnded:
            return "not_ended"
        except sw.WorkflowNotFound:
            return "not_found"
        except ValueError as exc:
            return f"invalid: {exc}"
        return "forked:" + handle.run_id

    answer = await driver.client(op)
    run_id = answer.removeprefix("forked:") if answer.startswith("forked:") else None
    if run_id is None and not answer.startswith(("refused", "not_", "invalid")):
        run_id = answer  # found in place
    forked = Forked(top, None if source is None else source.run_id, from_step, answer)
    if run_id is None:
        await _check_refusal(driver, forked, source, steps, new_key)
        return forked
    forked.outcome, forked.run_id = "forked", run_id
    await _check_refusal(driver, forked, source, steps, new_key)
    if source is not None and source.status.ended:
        forked.kept = forking.plan(source, steps, from_step).kept
        forked.kept_children = tuple(
            str(json.loads(s.result))
            for s in steps
            if s.kind is StepKind.CHILD and s.result is not None and s.call_id in forked.kept
        )
    driver.sent.setdefault(run_id, set())
    for label in sorted(driver.sent.get(forked.source_run or "", ())):
        await _send(driver, new_key, label)
        driver.sent[run_id].add(label)
    return forked


async def _send(driver: Driver, key: str, label: str) -> None:
    if any(label in talking.update_labels(top) for top in driver.scenario.workflows):
        await talking.send_update(driver, key, label, f"{label}-fork", f"sig:{label}")
        return

    async def op(manager: sw.Manager) -> None:
        try:
            await manager.signal(label).send(key, f"sig:{label}")
        except sw.SagawayError as exc:
            if "has ended" not in str(exc):
                raise  # else it replayed its kept receive and ended: nothing to deliver

    await driver.client(op)


async def _check_refusal(
    driver: Driver,
    forked: Forked,
    source: WorkflowRecord | None,
    steps: list[StepRecord],
    new_key: str,
) -> None:
    """The answer is one the source allows; a refused fork created nothing."""
    assert driver.observer is not None
    outcome, n, problems = forked.outcome, forked.from_step, driver.problems
    what = f"fork of {forked.top.key} from step {n} (force={forked.top.fork_force})"
    if outcome != "forked":
        created = await driver.observer.get_workflow(new_key)
        if created is not None:
            problems.append(f"{what} was answered {outcome!r}, yet created run {created.run_id}")
    if source is None:
        if outcome != "not_found" or not driver.settings.purge:
            problems.append(f"{what}: the source is gone (purged), yet the answer was {outcome!r}")
        return
    if not source.status.ended:
        if outcome != "not_ended":
            problems.append(f"{what}: the source is {source.status.value}, answer {outcome!r}")
        return
    if outcome.startswith("invalid:") and "recorded its cancellation" in outcome:
        # A fork that would keep the step where the source's cancellation was delivered is
        # refused (kept, it would cancel the fork again at the same call): docs/fork.md.
        if not any(is_cancel_step(s) for s in steps):
            problems.append(f"{what} was answered {outcome!r}, but no step recorded a cancel")
        return
    tops = [(forking.top_level(s.call_id), s) for s in steps]
    comps_top = [s for t, s in tops if t is not None and t >= n and s.kind is StepKind.COMPENSATION]
    comps_branch = [s for t, s in tops if t is None and s.kind is StepKind.COMPENSATION]
    kept_top = [s for t, s in tops if t is not None and t < n and s.kind in _EFFECTS]
    kept_branch = [s for t, s in tops if t is None and s.kind in _EFFECTS]
    force = forked.top.fork_force
    must_refuse = not force and bool(comps_top) and bool(kept_top)
    may_refuse = (
        not force and n > 1 and bool(comps_top or comps_branch) and bool(kept_top or kept_branch)
    )
    live_child = await _kept_live_child(driver, steps, n)
    if outcome == "refused":
        if not may_refuse:
            problems.append(
                f"{what} was refused, but it drops no compensation the source recorded "
                f"({_names(comps_top + comps_branch)}) or keeps no step with effects"
            )
    elif must_refuse:
        problems.append(
            f"{what} was answered {outcome!r}: it drops the source's compensations "
            f"{_names(comps_top)} and keeps {_names(kept_top)} (ForkRefused expected)"
        )
    elif outcome == "not_ended" and not live_child:
        problems.append(f"{what}: WorkflowNotEnded, but the source ended and no kept child is live")
    elif outcome == "forked" and live_child:
        problems.append(f"{what} was forked although it keeps the start of a live child")
    elif (
        outcome == "not_found"
        and driver.settings.purge
        and await _kept_purged_child(driver, steps, n)
    ):
        pass  # a kept step started a child a purge deleted: its end is gone (docs/fork.md)
    elif outcome not in ("forked", "not_ended", "refused"):
        problems.append(f"{what} was answered {outcome!r} (source {source.status.value})")


def source_children(driver: Driver, info: RunInfo) -> list[RunInfo]:
    """The children of a fork's source that the fork reads as its own (none for another run):
    those whose starts it kept, and those under keys its program chose (its arguments are the
    source's, so a ``slash`` key is ``<source key>/<n>``, and a chosen key names one execution).
    A cancelled one cancels the fork."""
    forked = next((f for f in driver.forked if f.run_id == info.run_id), None)
    if forked is None:
        return []
    world = driver.world
    return [
        run
        for run in world.runs.values()
        if (run.key in forked.kept_children and run.seq < info.seq)
        or (run.parent_key == forked.top.key and run.key in world.chosen_keys)
    ]


def _names(steps: list[StepRecord]) -> str:
    return ", ".join(f"{s.call_id} {s.kind.value}" for s in steps) or "none"


async def _kept_live_child(driver: Driver, steps: list[StepRecord], n: int) -> bool:
    """Whether a child start the fork may keep (any in a branch) names a live child. A fork
    from step 1 keeps nothing (docs/fork.md), a gather's branches included."""
    children = await _kept_children(driver, steps, n)
    return any(child is not None and not child.status.ended for child in children)


async def _kept_purged_child(driver: Driver, steps: list[StepRecord], n: int) -> bool:
    """Whether a child start the fork may keep names a child no longer in the database."""
    return any(child is None for child in await _kept_children(driver, steps, n))


async def _kept_children(
    driver: Driver, steps: list[StepRecord], n: int
) -> list[WorkflowRecord | None]:
    """The current records (None: purged) of the children whose starts a fork from ``n`` may
    keep (any in a branch)."""
    assert driver.observer is not None
    last = max((t for s in steps if (t := forking.top_level(s.call_id)) is not None), default=0)
    if n == 1 and last > 0:
        return []  # from step 1 nothing is kept, unless step 1 is one past the last (none)
    found = []
    for step in steps:
        top = forking.top_level(step.call_id)
        if step.kind is not StepKind.CHILD or step.result is None or (top is not None and top >= n):
            continue
        found.append(await driver.observer.get_workflow(str(json.loads(step.result))))
    return found


@dataclasses.dataclass(frozen=True)
class Kept:
    """A fork's run, as the outcome and compensation checks read it: what it replayed."""

    completed: dict[str, float]
    """Labels of kept activity steps -> their recorded completion."""
    compensated: frozenset[str]
    """Labels whose compensation step was kept (replayed, not run)."""


def kept(driver: Driver, run_id: str, completed_at: dict[tuple[str, str], float]) -> Kept:
    """What the fork ``run_id`` replayed (nothing, for a run that is not a fork)."""
    forked = next((f for f in driver.forked if f.run_id == run_id), None)
    if forked is None:
        return Kept({}, frozenset())
    labels = _source_labels(driver, forked)
    completed = {
        labels[(c, False)]: completed_at[(run_id, c)]
        for c in forked.kept
        if (c, False) in labels and (run_id, c) in completed_at
    }
    compensated = frozenset(labels[(c, True)] for c in forked.kept if (c, True) in labels)
    return Kept(completed, compensated)


def _source_labels(driver: Driver, forked: Forked) -> dict[tuple[str, bool], str]:
    """(call id, compensation) -> label, of the source's activities that completed."""
    return {
        (e.call_id, e.compensation): e.label
        for e in driver.world.executions
        if e.run_id == forked.source_run and e.outcome == "ok"
    }


def check(driver: Driver) -> list[str]:
    """No kept step runs again in the fork; its new steps' keys are not the source's."""
    out = []
    for forked in driver.forked:
        if forked.run_id is None:
            continue
        run, step = forked.run_id[-8:], forked.from_step
        name = f"fork {forked.top.key}{SUFFIX} (run {run}, from step {step})"
        labels = _source_labels(driver, forked)
        kept_calls = {(labels[c], c[1]) for c in labels if c[0] in forked.kept}
        source_keys = {e.key for e in driver.world.executions if e.run_id == forked.source_run}
        for e in driver.world.executions:
            if e.run_id != forked.run_id:
                continue
            what = "compensation" if e.compensation else "activity"
            if e.call_id in forked.kept or (e.label, e.compensation) in kept_calls:
                out.append(
                    f"{name}: {what} {e.label} (call {e.call_id}) of a kept step executed "
                    "again (its recorded outcome is to be replayed)"
                )
            if e.key in source_keys:
                out.append(f"{name}: {what} {e.label} ran under the source's key {e.key!r}")
    return out


def blocks(driver: Driver) -> Counter[str]:
    """How the client's forks went (for the session's summary)."""
    out: Counter[str] = Counter()
    for forked in driver.forked:
        out[f"fork_{forked.outcome.split(':')[0]}"] += 1
        out["fork_forced"] += forked.top.fork_force and forked.outcome == "forked"
    return out
