"""Records from rows read by column name whatever the query's column order, and copies of
records with fields changed (``record_copy.changed``), as ``dataclasses.replace`` makes them."""

from __future__ import annotations

import dataclasses
import sqlite3

import pytest

from sagaway import errors
from sagaway.states import StepKind, StepStatus, WorkflowStatus
from sagaway.store._rows import step_from_row, workflow_from_row
from sagaway.store.record_copy import changed
from sagaway.store.records import StepRecord, WorkflowRecord

RECORD = WorkflowRecord(
    run_id="r-1", key="k-1", name="wf", args="{}", args_hash="h", status=WorkflowStatus.RUNNING,
    result=None, error=None, parent_key=None, created_at=1.0, updated_at=2.0, ended_at=None,
    lease_owner="me", lease_expires_at=3.0, next_run_at=None, suspend_count=0,
    ordering_key="o", ordering_seq=2, priority=5, fairness_key="t", fairness_weight=2.0,
    fair_pass=0.5,
)  # fmt: skip


def _sqlite_rows(record: WorkflowRecord, order: list[str], extra: bool) -> list[sqlite3.Row]:
    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    values = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
    values["status"] = record.status.value
    columns = [name for name in order if name != "previous_owner"]
    select = ", ".join(f":{name} AS {name}" for name in columns)
    if extra:
        select = "42 AS unrelated, " + select
    return [conn.execute(f"SELECT {select}", values).fetchone() for _ in range(2)]


@pytest.mark.parametrize("extra", [False, True])
def test_a_workflow_is_read_by_column_name_in_any_order(extra: bool) -> None:
    names = [f.name for f in dataclasses.fields(WorkflowRecord)]
    for order in (names, list(reversed(names))):
        for row in _sqlite_rows(RECORD, order, extra):  # the second: the remembered places
            assert workflow_from_row(row) == RECORD
        as_dict = {name: getattr(RECORD, name) for name in names if name != "previous_owner"}
        assert workflow_from_row({**as_dict, "status": "RUNNING"}) == RECORD  # psycopg's rows


def test_an_unreadable_status_names_the_row() -> None:
    row = {**{f.name: getattr(RECORD, f.name) for f in dataclasses.fields(RECORD)}}
    row["status"] = "EXPLODED"
    with pytest.raises(errors.CorruptRecord, match="workflow 'k-1' \\(run r-1\\)"):
        workflow_from_row(row)
    step = {"run_id": "r-1", "call_id": "c-1", "kind": "nonsense", "status": "ok"}
    with pytest.raises(errors.CorruptRecord, match="step c-1 of run r-1"):
        step_from_row(step)


def test_changed_copies_as_dataclasses_replace_does() -> None:
    changes = {"status": WorkflowStatus.COMPLETED, "result": "1", "lease_owner": None, "args": ""}
    assert changed(RECORD, **changes) == dataclasses.replace(RECORD, **changes)
    copy = changed(RECORD, fair_pass=9.0)  # not compared, still copied
    assert copy.fair_pass == 9.0 and copy.priority == 5 and RECORD.fair_pass == 0.5
    step = StepRecord(
        run_id="r", call_id="c", kind=StepKind.ACTIVITY, name="a", status=StepStatus.COMPLETED,
        attempts=1, result="1", error=None, started_at=1.0, ended_at=2.0,
    )  # fmt: skip
    assert changed(step, ended_at=3.0) == dataclasses.replace(step, ended_at=3.0)
    with pytest.raises(TypeError, match="no field 'nope'"):
        changed(RECORD, nope=1)
