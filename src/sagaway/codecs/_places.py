"""Where a sealed payload belongs (its *place*): what its encryption is bound to.

A place names one slot of the database by identifiers that never change for that slot:

=============================================  =============================================
``("run", R, "args" | "result" | "error")``    a workflow execution's arguments, result, error
``("run", R, "step", C, "result" | "error")``  the result or error of step (call id) ``C`` of
                                               run ``R``; the errors of its earlier attempts
                                               (``attempt_errors`` copies of that error) too
``("run", R, "signal", N)``                    a signal ``N`` sent to run ``R``, and the step
                                               of ``R`` that received it (the store copies the
                                               payload into that step unopened)
``("run", R, "signal", N, "rejected")``        why such a signal was refused
``("run", R, "output", K, N)``                 a value run ``R`` published: event key or
                                               stream (``K``: ``event`` / ``stream``) ``N``
``("schedule", S, "args")``                    the arguments of schedule ``S``
``("burst", W, K, "args")``                    the arguments of a debounced start of workflow
                                               ``W`` with debounce key ``K`` (see ``burst``)
=============================================  =============================================

``R`` is a run id (one execution: a retry keeps it, a fork or a replacement gets a new one),
never the workflow key, which a replacement (``TERMINATE_EXISTING``) reuses.
"""

from __future__ import annotations

import json
from typing import Any

from sagaway.states import StepKind
from sagaway.store.records import StepRecord

Place = tuple[str, ...]


def run(run_id: str, field: str) -> Place:
    """``args``, ``result`` or ``error`` of the execution ``run_id``."""
    return ("run", run_id, field)


def step(record: StepRecord, field: str) -> Place:
    """``result`` or ``error`` of a step. A received signal's result is the signal's payload,
    copied by the store as it was sealed: its place is the signal's."""
    if field == "result" and record.kind is StepKind.SIGNAL:
        return signal(record.run_id, record.name)
    return ("run", record.run_id, "step", record.call_id, field)


def step_error(run_id: str, call_id: str) -> Place:
    """The error of step ``call_id`` (any of its attempts: the store copies it unopened)."""
    return ("run", run_id, "step", call_id, "error")


def signal(run_id: str, name: str) -> Place:
    return ("run", run_id, "signal", name)


def signal_rejected(run_id: str, name: str) -> Place:
    return ("run", run_id, "signal", name, "rejected")


def output(run_id: str, kind: str, name: str) -> Place:
    """A value ``run_id`` published as the event ``name`` or on the stream ``name``."""
    return ("run", run_id, "output", kind, name)


def schedule(schedule_id: str) -> Place:
    return ("schedule", schedule_id, "args")


def burst(name: str, debounce_key: str) -> Place:
    """The arguments of a debounced start. A start that joins an open burst writes its
    arguments into the burst's run, whose id it cannot know when it seals them (the store
    finds the burst in its own transaction): so every start of a burst seals them for the
    workflow and its debounce key, and only the runs of that key open them."""
    return ("burst", name, debounce_key, "args")


def args_places(run_id: str, name: str, debounce_key: str | None) -> tuple[Place, ...]:
    """Where the arguments of a run may be sealed, the place a new start seals for first:
    a debounced run's under its burst, then (a fork's copy, a row written before bursts
    had a place) under the run."""
    own = run(run_id, "args")
    return (own,) if debounce_key is None else (burst(name, debounce_key), own)


def encode(place: Place) -> bytes:
    """The place as associated data: a JSON array, so no two places share a spelling."""
    return json.dumps(list(place), separators=(",", ":")).encode()


def from_envelope(value: Any) -> Place | None:
    """The place an envelope says it was sealed for (None if it does not say, or garbled)."""
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


_FIELDS = {"args": "the arguments", "result": "the result", "error": "the error"}


def describe(place: Place | None) -> str:
    """``the arguments of run '0b5c…'``, ``the result of step 3 of run '0b5c…'``."""
    if place is None:
        return "an unknown place"
    match place:
        case ("run", run_id, field) if field in _FIELDS:
            return f"{_FIELDS[field]} of run {run_id!r}"
        case ("run", run_id, "step", call_id, field) if field in _FIELDS:
            return f"{_FIELDS[field]} of step {call_id} of run {run_id!r}"
        case ("run", run_id, "signal", name):
            return f"signal {name!r} of run {run_id!r}"
        case ("run", run_id, "signal", name, "rejected"):
            return f"why signal {name!r} of run {run_id!r} was refused"
        case ("run", run_id, "output", kind, name):
            return f"a value of {kind} {name!r} of run {run_id!r}"
        case ("schedule", schedule_id, "args"):
            return f"the arguments of schedule {schedule_id!r}"
        case ("burst", name, key, "args"):
            return f"the arguments of a debounced start of {name!r} (key {key!r})"
    return f"place {json.dumps(list(place))}"
