"""The replay check: would this code replay that execution's history? Nothing runs or is written.

The workflow function runs against the execution's recorded steps: every recorded call returns
its recorded outcome, no activity runs, and the check stops at the first call that has no final
outcome recorded (``ReplayFrontier``: from there on the code would run for the first time, which
is allowed to differ). The verdict:

- ``ok``: the code made the recorded calls, in order, up to the frontier or to its end;
- ``diverged``: the code asked for another call than the one recorded at some point (a reorder,
  a renamed or removed activity, a new step without ``sw.patched``), or it ended while recorded
  calls were left that it no longer makes;
- ``error``: the check could not run (the workflow is not registered, its input unreadable).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from typing import TYPE_CHECKING, Literal

from sagaway import errors
from sagaway._engine import cancel_points, context
from sagaway._engine.execution import ReplayFrontier
from sagaway._engine.executor import Execution
from sagaway.states import StepKind, WorkflowStatus
from sagaway.store.records import Lease, ListQuery, StepRecord, WorkflowRecord

if TYPE_CHECKING:
    from sagaway._engine.engine import Engine

Verdict = Literal["ok", "diverged", "error"]


@dataclasses.dataclass(frozen=True, slots=True)
class ReplayReport:
    """What replaying one execution against the current code found."""

    key: str
    run_id: str
    workflow: str
    status: WorkflowStatus
    """The execution's status when it was read."""
    verdict: Verdict
    replayed: int
    """Recorded calls the code made again before it stopped."""
    recorded: int
    """Recorded calls in the history."""
    message: str
    call_id: str | None = None
    """Where the code and the history part (``diverged``)."""
    recorded_call: str | None = None
    """What the history holds there (``activity 'charge'``)."""
    requested_call: str | None = None
    """What the code asked for instead (None: nothing, the code ended)."""

    @property
    def diverged(self) -> bool:
        return self.verdict == "diverged"


_REPLAY_LEASE = Lease("replay-check", "replay-check", math.inf)


async def replay(engine: Engine, record: WorkflowRecord, steps: list[StepRecord]) -> ReplayReport:
    """Replay ``record``'s history (``steps``) against the code registered in ``engine``."""
    context.install_task_factory(asyncio.get_running_loop())
    report = _Reporter(record, steps)
    try:
        defn = engine.registry.workflow(record.name)
        args, kwargs = defn.codec.decode_args(record.args)
    except (errors.NotRegistered, errors.PayloadError) as exc:
        return report.error(f"{type(exc).__name__}: {exc}")
    execution = Execution(engine, defn, record, _REPLAY_LEASE, steps)
    execution.replay_only = True
    token = context.enter(execution)
    ended = False
    try:
        await defn.fn(*args, **kwargs)
        ended = True
    except ReplayFrontier:
        pass
    except errors.NonDeterminismError as exc:
        return report.diverged(exc, execution.replayed_ids)
    except (Exception, errors.Cancelled):
        ended = True  # the code raised to its end (a business error): a normal end
    finally:
        execution.stopped = True  # a branch left running starts nothing more
        context.leave(token)
    if isinstance(execution.doomed, errors.NonDeterminismError):  # swallowed by the code
        return report.diverged(execution.doomed, execution.replayed_ids)
    if ended:
        left = report.unvisited(execution.replayed_ids)
        if left is not None:
            return report.ended_early(left, execution.replayed_ids)
    return report.ok(execution.replayed_ids, ended)


class _Reporter:
    def __init__(self, record: WorkflowRecord, steps: list[StepRecord]) -> None:
        self.record = record
        self.steps = steps

    def _report(
        self, verdict: Verdict, replayed: int, message: str, **where: str | None
    ) -> ReplayReport:
        r = self.record
        return ReplayReport(
            key=r.key,
            run_id=r.run_id,
            workflow=r.name,
            status=r.status,
            verdict=verdict,
            replayed=replayed,
            recorded=len(self.steps),
            message=message,
            **where,
        )

    def error(self, message: str) -> ReplayReport:
        return self._report("error", 0, message)

    def diverged(self, exc: errors.NonDeterminismError, seen: set[str]) -> ReplayReport:
        return self._report(
            "diverged",
            len(seen),
            str(exc),
            call_id=exc.call_id,
            recorded_call=exc.recorded,
            requested_call=exc.requested,
        )

    def unvisited(self, seen: set[str]) -> StepRecord | None:
        """The first recorded call the code did not make again, if any (cancel outcomes are
        recorded on calls the code made, so they count as made; one delivered at the
        workflow's end follows the code's last call)."""
        left = [
            s
            for s in self.steps
            if s.call_id not in seen
            and not (s.kind is StepKind.CANCEL and s.name == cancel_points.WORKFLOW_END)
        ]
        return min(left, key=lambda s: s.started_at) if left else None

    def ended_early(self, step: StepRecord, seen: set[str]) -> ReplayReport:
        recorded = f"{step.kind.value} {step.name!r}"
        return self._report(
            "diverged",
            len(seen),
            f"workflow {self.record.name!r} ({self.record.key}): the code ended without making "
            f"durable call {step.call_id}, recorded as {recorded}: a step was removed or the "
            "code now returns earlier (see docs/patching.md)",
            call_id=step.call_id,
            recorded_call=recorded,
        )

    def ok(self, seen: set[str], ended: bool) -> ReplayReport:
        where = "to its end" if ended else "up to where its history ends"
        return self._report(
            "ok", len(seen), f"replays {len(seen)} of {len(self.steps)} recorded calls, {where}"
        )


LIVE = frozenset(
    {
        WorkflowStatus.PENDING,
        WorkflowStatus.RUNNING,
        WorkflowStatus.WAITING,
        WorkflowStatus.SUSPENDED,
    }
)
_PAGE = 200


async def replay_listed(
    engine: Engine, *, statuses: frozenset[WorkflowStatus], since: float | None
) -> list[ReplayReport]:
    """Replay every current execution in ``statuses`` (created at or after ``since``)."""
    reports: list[ReplayReport] = []
    after: tuple[float, str] | None = None
    while True:
        page = await engine.list_page(
            ListQuery(limit=_PAGE, statuses=statuses, since=since, after=after)
        )
        steps = await engine.load_steps_many([r.run_id for r in page])
        for record in page:
            reports.append(await replay(engine, record, steps.get(record.run_id, [])))
        if len(page) < _PAGE:
            return reports
        after = (page[-1].created_at, page[-1].run_id)
