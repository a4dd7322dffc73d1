"""The engine's telemetry reports, checked against what really happened.

Installed as an observer (``sagaway.observe``) for the whole scenario, so every program runs
the telemetry code paths of the engine; after the run:

- no span (a workflow run, an activity attempt) is ended twice;
- an attempt reported as run (any outcome but ``interrupted``, and not refused by a process the
  harness killed) is backed by an execution of that call the World recorded: no more attempt
  reports than executions, per call;
- a workflow reported ended has that status in the database, and is reported once per run.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from sagaway import observe
from tests.generative.world import ProcessDead

if TYPE_CHECKING:
    from tests.generative.driver import Driver


class _Span(observe.Span):
    def __init__(self, owner: CheckingObserver, what: str, call: tuple[str, str, bool] | None):
        self.owner = owner
        self.what = what
        self.call = call
        self.ended = False

    def end(self, outcome: str, error: BaseException | None = None) -> None:
        if self.ended:
            self.owner.problems.append(f"telemetry: the span of {self.what} was ended twice")
        self.ended = True
        # A dead (simulated) process refuses to run the effect: that attempt ran nothing.
        dead = isinstance(error, ProcessDead) or isinstance(
            getattr(error, "__cause__", None), ProcessDead
        )
        if self.call is not None and outcome != "interrupted" and not dead:
            self.owner.attempts[self.call] += 1


class CheckingObserver(observe.Observer):
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.attempts: Counter[tuple[str, str, bool]] = Counter()
        self.ended: list[tuple[str, str]] = []

    def workflow_ended(self, name: str, key: str, status: str) -> None:
        self.ended.append((key, status))

    def execution(
        self, name: str, key: str, run_id: str, trace_context: str | None
    ) -> observe.Span:
        return _Span(self, f"a run of {key}", None)

    def attempt(
        self,
        name: str,
        key: str,
        run_id: str,
        call_id: str,
        attempt: int,
        *,
        compensation: bool,
    ) -> observe.Span:
        what = f"attempt {attempt} of call {call_id} of {key}"
        return _Span(self, what, (run_id, call_id, compensation))

    def check(self, driver: Driver, records: dict[str, Any]) -> list[str]:
        out = list(self.problems)
        executed: Counter[tuple[str, str, bool]] = Counter(
            (e.run_id, e.call_id, e.compensation) for e in driver.world.executions
        )
        for call, reported in sorted(self.attempts.items()):
            if reported > executed[call]:
                out.append(
                    f"telemetry: {reported} attempts reported of call {call[1]} of run "
                    f"{call[0][-8:]}, but it executed {executed[call]} times"
                )
        statuses: dict[str, Counter[str]] = {}
        for record in records.values():
            statuses.setdefault(record.key, Counter())[record.status.value] += 1
        for (key, status), times in sorted(Counter(self.ended).items()):
            in_db = statuses.get(key, Counter())[status]
            if times > in_db:
                out.append(
                    f"telemetry: {key} reported ended {status} {times} times; the database "
                    f"holds {in_db} such run(s)"
                )
        return out
