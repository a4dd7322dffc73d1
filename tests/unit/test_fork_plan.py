"""What a fork keeps (``_engine.forking.plan``), on recorded histories built by hand: top-level
steps before N, branch steps that ended before step N started, nothing that may depend on step
N; the range of N; compensations dropped."""

from __future__ import annotations

import pytest

from sagaway._engine import forking
from sagaway.states import StepKind, StepStatus, WorkflowStatus
from sagaway.store.records import StepRecord, WorkflowRecord

T0 = 1_700_000_000.0


def _source(status: WorkflowStatus = WorkflowStatus.FAILED) -> WorkflowRecord:
    return WorkflowRecord(
        run_id="run-1",
        key="order-7",
        name="checkout",
        args="{}",
        args_hash="h",
        status=status,
        result=None,
        error=None,
        parent_key=None,
        created_at=T0,
        updated_at=T0,
        ended_at=T0 + 100,
        lease_owner=None,
        lease_expires_at=None,
        next_run_at=None,
        suspend_count=0,
    )


def _step(
    call_id: str,
    started: float,
    ended: float | None,
    *,
    kind: StepKind = StepKind.ACTIVITY,
    status: StepStatus = StepStatus.COMPLETED,
) -> StepRecord:
    return StepRecord(
        run_id="run-1",
        call_id=call_id,
        kind=kind,
        name="a",
        status=status,
        attempts=1,
        result='"r"',
        error=None,
        started_at=T0 + started,
        ended_at=None if ended is None else T0 + ended,
    )


# 1, then a gather of branches 1/ and 2/ (each two calls), then 2 (failed), then compensations.
HISTORY = [
    _step("1", 0, 1),
    _step("1/1", 1.1, 2),
    _step("2/1", 1.1, 3),
    _step("1/2", 2.1, 4),
    _step("2/2", 3.1, 5),
    _step("2", 5.1, 6, status=StepStatus.FAILED),
    _step("3", 6.1, 7, kind=StepKind.COMPENSATION),
    _step("4", 7.1, 8, kind=StepKind.COMPENSATION),
]


def test_keeps_top_level_steps_before_n_and_branches_that_ended_before_it() -> None:
    plan = forking.plan(_source(), HISTORY, 2)
    assert plan.kept == ("1", "1/1", "2/1", "1/2", "2/2")
    assert plan.dropped == ("2", "3", "4")
    assert plan.compensated == ("3", "4")
    assert (plan.from_step, plan.last_step, plan.kept_top_level) == (2, 4, (1, 1))
    assert (plan.source_key, plan.source_run_id, plan.source_status) == (
        "order-7",
        "run-1",
        WorkflowStatus.FAILED,
    )


def test_from_step_1_keeps_nothing_and_compensations_are_top_level_steps() -> None:
    plan = forking.plan(_source(), HISTORY, 1)
    assert plan.kept == () and plan.kept_top_level is None
    assert forking.plan(_source(), HISTORY, 3).kept == ("1", "1/1", "2/1", "1/2", "2/2", "2")
    assert forking.plan(_source(), HISTORY, 3).compensated == ("3", "4")


def test_from_step_1_keeps_nothing_of_a_gather_that_ended_before_step_1() -> None:
    # A workflow that opens with a gather: its branches ended before step 1 started.
    history = [
        _step("1/1", 0, 1),
        _step("2/1", 0, 2),
        _step("1", 3, 4, status=StepStatus.FAILED),
        _step("2", 4.1, 5, kind=StepKind.COMPENSATION),
    ]
    plan = forking.plan(_source(), history, 1)
    assert plan.kept == () and plan.compensated == ("2",)
    assert forking.plan(_source(), history, 2).kept == ("1/1", "2/1", "1")


def test_one_past_the_last_step_keeps_everything_even_unfinished_steps() -> None:
    history = [*HISTORY[:5], _step("2", 5.1, None, status=StepStatus.ERROR)]
    plan = forking.plan(_source(WorkflowStatus.TERMINATED), history, 3)
    assert plan.kept == tuple(s.call_id for s in history) and plan.dropped == ()


def test_a_branch_step_that_ended_after_step_n_started_is_dropped() -> None:
    # Branch 1/ was spawned before step 2 and ran beside it: its second call ended after step
    # 2 started (it may have used step 2's outcome), its first before.
    history = [
        _step("1", 0, 1),
        _step("1/1", 1.1, 1.5),
        _step("2", 2, 3),
        _step("1/2", 1.6, 2.5),
        _step("1/3", 3.1, 4),
        _step("3", 4.1, 5, status=StepStatus.FAILED),
    ]
    assert forking.plan(_source(), history, 2).kept == ("1", "1/1")
    assert forking.plan(_source(), history, 3).kept == ("1", "1/1", "2", "1/2", "1/3")


def test_unfinished_branch_steps_are_dropped() -> None:
    history = [
        _step("1", 0, 1),
        _step("1/1", 1.1, 1.2, status=StepStatus.RETRYING),
        _step("2/1", 1.1, 1.3, kind=StepKind.SIGNAL, status=StepStatus.WAITING),
        _step("2", 2, 3),
    ]
    assert forking.plan(_source(), history, 2).kept == ("1",)


def test_completions_recorded_on_a_clock_that_did_not_move_are_kept() -> None:
    # A coarse or fake clock: the gather's outcomes were recorded at T0+1 and T0+1 plus a
    # microsecond (completion times are strictly ordered), and step 2 started at T0+1.
    history = [
        _step("1/1", 0, 1),
        _step("2/1", 0, 1 + 1e-6),
        _step("1", 1, 1 + 2e-6),
        _step("2", 1, None, status=StepStatus.ERROR),
    ]
    assert forking.plan(_source(), history, 2).kept == ("1/1", "2/1", "1")


@pytest.mark.parametrize("from_step", [0, -1, 6, 99])
def test_from_step_out_of_range(from_step: int) -> None:
    with pytest.raises(ValueError, match=r"top-level steps are 1-4, so from_step must be 1-5"):
        forking.plan(_source(), HISTORY, from_step)


def test_from_step_of_a_workflow_without_steps() -> None:
    assert forking.plan(_source(), [], 1).kept == ()
    with pytest.raises(ValueError, match="recorded no step, so from_step must be 1"):
        forking.plan(_source(), [], 2)


def test_from_step_must_be_an_integer() -> None:
    with pytest.raises(ValueError, match="must be an integer"):
        forking.plan(_source(), HISTORY, True)
    with pytest.raises(ValueError, match="must be an integer"):
        forking.plan(_source(), HISTORY, "2")  # type: ignore[arg-type]


def test_top_level() -> None:
    assert [forking.top_level(c) for c in ("1", "12", "2/1", "2/1/3", "01", "")] == [
        1,
        12,
        None,
        None,
        None,
        None,
    ]


def test_a_dropped_compensation_that_ran_counts_whatever_its_outcome() -> None:
    """A compensation attempt that failed, or is to be retried, may have done part of its work:
    it is listed with the completed ones."""
    history = [
        *HISTORY[:6],
        _step("3", 6.1, 7, kind=StepKind.COMPENSATION, status=StepStatus.FAILED),
        _step("4", 7.1, 8, kind=StepKind.COMPENSATION, status=StepStatus.RETRYING),
        _step("5", 8.1, 9, kind=StepKind.COMPENSATION, status=StepStatus.ERROR),
    ]
    assert forking.plan(_source(), history, 2).compensated == ("3", "4", "5")
    assert forking.plan(_source(), history, 4).compensated == ("4", "5")
    assert forking.plan(_source(), history, 6).compensated == ()
