"""An execution's history as a JSON document (``sagaway show KEY --export``), and back.

The document holds the execution's record and every recorded step, as stored, so that a unit
test can replay it against new workflow code without the database it came from
(``sagaway.testing.replay_history``)::

    {"sagaway_history": 1, "workflow": {"run_id": ..., "name": ..., ...}, "steps": [{...}]}
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sagaway.states import StepKind, StepStatus, WorkflowStatus
from sagaway.store.records import StepRecord, WorkflowRecord

FORMAT = 1
"""The version of the document's layout (``sagaway_history``)."""

_NOT_STORED = {"previous_owner"}


def export(record: WorkflowRecord, steps: list[StepRecord]) -> dict[str, Any]:
    """The history document of ``record`` and its ``steps``."""
    workflow = {
        f.name: _plain(getattr(record, f.name))
        for f in dataclasses.fields(record)
        if f.name not in _NOT_STORED
    }
    return {
        "sagaway_history": FORMAT,
        "workflow": workflow,
        "steps": [{k: _plain(v) for k, v in dataclasses.asdict(s).items()} for s in steps],
    }


def load(document: object) -> tuple[WorkflowRecord, list[StepRecord]]:
    """The record and steps of a history document; ValueError says what is wrong with it."""
    if not isinstance(document, dict) or "sagaway_history" not in document:
        raise ValueError(
            "not a Sagaway history: expected a JSON object with 'sagaway_history', 'workflow' "
            "and 'steps' (made by `sagaway show KEY --export`)"
        )
    if document["sagaway_history"] != FORMAT:
        raise ValueError(
            f"history format {document['sagaway_history']!r} is not one this Sagaway reads "
            f"({FORMAT})"
        )
    workflow, steps = document.get("workflow"), document.get("steps")
    if not isinstance(workflow, dict) or not isinstance(steps, list):
        raise ValueError("a history needs a 'workflow' object and a 'steps' list")
    record = _record(WorkflowRecord, workflow, {"status": WorkflowStatus}, "workflow")
    return record, [
        _record(StepRecord, step, {"kind": StepKind, "status": StepStatus}, f"steps[{i}]")
        for i, step in enumerate(steps)
    ]


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, WorkflowStatus | StepKind | StepStatus) else value


def _record(cls: Any, fields: object, enums: dict[str, Any], where: str) -> Any:
    if not isinstance(fields, dict):
        raise ValueError(f"history {where} must be an object")
    known = {f.name for f in dataclasses.fields(cls)} - _NOT_STORED
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ValueError(f"history {where} has unknown fields: {', '.join(unknown)}")
    values = dict(fields)
    for name, enum in enums.items():
        try:
            values[name] = enum(values[name])
        except (KeyError, ValueError):
            raise ValueError(
                f"history {where}.{name} must be one of {', '.join(e.value for e in enum)}"
            ) from None
    try:
        return cls(**values)
    except TypeError as exc:
        raise ValueError(f"history {where}: {exc}") from None
