"""Talking to running workflows in the generative test: updates and pauses.

Updates (``settings.updates``): a receive drawn as an update is answered by
``manager.update(label).handle(echo, validator=refuse_bad)``. Where the client would send its
signal, it sends a request the validator refuses (``bad:<label>``), then the good one
(``sig:<label>``, the value the model expects), under update ids of their own, without waiting
for the answer (``timeout=0``: the workflow answers whenever it gets there). The checks
(``check``): a run holds at most one answer step per update id, never one for a refused
request; where the good one was answered, the refused one is marked rejected (it was sent
first, and requests of a name are taken oldest first), and asking again with the good id
returns the recorded answer.

Pauses (``settings.pauses``): after the first settle, the client pauses some top-level runs
(each with odds of 1 in 2 by its key), sends their "after" signals (the runs become due),
lets every process go idle and checks that no activity of a paused run began meanwhile, then
resumes them; the final outcome is the model's as for any run.
"""

from __future__ import annotations

import zlib
from collections import Counter
from typing import TYPE_CHECKING, Any

import sagaway as sw
from tests.generative import purging
from tests.generative.program import Receive, TopLevel, walk

if TYPE_CHECKING:
    from tests.generative.driver import Driver


def update_labels(top: TopLevel) -> set[str]:
    return {n.label for n in walk(top.program.body) if isinstance(n, Receive) and n.update}


async def send_update(driver: Driver, key: str, label: str, update_id: str, payload: str) -> str:
    """Send one update request, not waiting for its answer: ``sent``, ``ended`` (or purged)."""

    async def op(manager: sw.Manager) -> str:
        try:
            await manager.update(label).send(key, payload, update_id=update_id, timeout=0)
        except (TimeoutError, sw.UpdateRejected):
            pass  # not answered yet, or refused already: the checks ask again
        except sw.SagawayError as exc:
            if "ended" not in str(exc) and not driver._purged(exc):
                raise
            return "ended"
        return "sent"

    result: str = await driver.client(op)
    return result


async def send(driver: Driver, top: TopLevel, label: str, dup: bool, round_: int) -> None:
    """The client's updates where it would send signal ``label`` (see the module)."""
    run_id = driver.top_runs[top.key]
    good = f"{label}-{round_}"
    await send_update(driver, top.key, label, f"{good}-bad", f"bad:{label}")
    for _ in range(2 if dup else 1):
        await send_update(driver, top.key, label, good, f"sig:{label}")
    driver.sent[run_id].add(label)
    driver.updates.append((run_id, top.key, label, good))


async def check(driver: Driver) -> list[str]:
    problems: list[str] = []
    store = driver.observer
    assert store is not None
    for run_id, key, label, good in driver.updates:
        if await store.get_run(run_id) is None:
            continue  # purged
        if isinstance(store, purging.Remembering) and await store.gone(run_id):
            continue  # purged: its steps are remembered, its signals are gone
        steps = await store.load_steps(run_id)
        answers = [s for s in steps if s.kind is sw.StepKind.UPDATE and s.name.startswith(label)]
        mine = [s for s in answers if s.name == f"{label}:{good}"]
        if len(mine) > 1 or any(s.name == f"{label}:{good}-bad" for s in answers):
            problems.append(f"{key}: update {good}: answer steps {[s.name for s in answers]}")
        if not mine:
            continue
        driver.answered += 1
        signals = await store.list_signals(run_id)
        bad = [s for s in signals if s.dedupe_id == f"{good}-bad"]
        if not bad or bad[0].rejected is None:
            problems.append(f"{key}: the refused update {good}-bad was not rejected: {bad}")
        if mine[0].status is not sw.StepStatus.COMPLETED or mine[0].result is None:
            problems.append(f"{key}: update {good} answered {mine[0]}")
        current = await store.get_workflow(key)
        if current is not None and current.run_id == run_id:
            answer = await _ask_again(driver, key, label, good)
            if answer != f"sig:{label}":
                problems.append(f"{key}: update {good} answered {answer!r} when asked again")
    return problems


async def _ask_again(driver: Driver, key: str, label: str, good: str) -> Any:
    async def op(manager: sw.Manager) -> Any:
        result = await manager.update(label).send(key, f"sig:{label}", update_id=good, timeout=0)
        return result.result

    return await driver.client(op)


def paused(top: TopLevel) -> bool:
    """Whether the client pauses ``top`` (odds of 1 in 2, by its key: replayable)."""
    return zlib.crc32(top.key.encode()) % 2 == 0


async def pause(driver: Driver, key: str, on: bool) -> None:
    async def op(manager: sw.Manager) -> None:
        try:
            await (manager.pause if on else manager.resume)(key)
        except sw.WorkflowNotFound as exc:
            if not driver._purged(exc):
                raise

    await driver.client(op)


def began(driver: Driver, run_ids: set[str]) -> int:
    """How many activity attempts of ``run_ids`` have begun so far."""
    return sum(1 for e in driver.world.executions if e.run_id in run_ids)


def blocks(driver: Driver) -> Counter[str]:
    """Updates sent and answered, runs paused (the run's summary)."""
    return Counter(
        updates_sent=len(driver.updates), updates_answered=driver.answered, paused=driver.paused
    )
