"""The verbs both SQL stores hand to collaborators (schedules, audit trail, queue limits,
pauses, outputs): each dialect names its five classes (``KINDS``), and this class builds them
given the dialect's way to run a transaction and forwards to them, so the building and the
forwarding are written once for both and the signatures only in the contract."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

from sagaway.store.contract import AuditVerbs, QueueLimitVerbs, ScheduleVerbs
from sagaway.store.forwarding import forward
from sagaway.store.output_verbs import OutputVerbs
from sagaway.store.pause_verbs import PauseVerbs


@dataclasses.dataclass(frozen=True)
class Kinds:
    """A dialect's five collaborator classes, each built given the dialect's way to run a
    transaction (``SQLiteStore._call``, ``PostgresStore._run``)."""

    schedules: Callable[[Any], ScheduleVerbs]
    audit: Callable[[Any], AuditVerbs]
    queue_limits: Callable[[Any], QueueLimitVerbs]
    pauses: Callable[[Any], PauseVerbs]
    outputs: Callable[[Any], OutputVerbs]


class Collaborators:
    """Forwards the schedule, audit, queue limit, pause and output verbs of a store to its
    collaborators, built from the dialect's ``KINDS``."""

    KINDS: ClassVar[Kinds]

    def __init__(self, run: object) -> None:
        kinds = self.KINDS
        self._schedules = kinds.schedules(run)
        self._audit = kinds.audit(run)
        self._queue_limits = kinds.queue_limits(run)
        self._pauses = kinds.pauses(run)
        self._outputs = kinds.outputs(run)

    put_schedule = forward(ScheduleVerbs.put_schedule, "_schedules")
    list_schedules = forward(ScheduleVerbs.list_schedules, "_schedules")
    set_schedule_paused = forward(ScheduleVerbs.set_schedule_paused, "_schedules")
    delete_schedule = forward(ScheduleVerbs.delete_schedule, "_schedules")
    fire_schedule = forward(ScheduleVerbs.fire_schedule, "_schedules")
    record_audit = forward(AuditVerbs.record_audit, "_audit")
    list_audit = forward(AuditVerbs.list_audit, "_audit")
    acquire_queue_slot = forward(QueueLimitVerbs.acquire_queue_slot, "_queue_limits")
    renew_queue_slot = forward(QueueLimitVerbs.renew_queue_slot, "_queue_limits")
    release_queue_slot = forward(QueueLimitVerbs.release_queue_slot, "_queue_limits")
    leave_queue = forward(QueueLimitVerbs.leave_queue, "_queue_limits")
    pause_workflow = forward(PauseVerbs.pause_workflow, "_pauses")
    paused_runs = forward(PauseVerbs.paused_runs, "_pauses")
    pause_calls = forward(PauseVerbs.pause_calls, "_pauses")
    list_paused_calls = forward(PauseVerbs.list_paused_calls, "_pauses")
    publish = forward(OutputVerbs.publish, "_outputs")
    read_outputs = forward(OutputVerbs.read_outputs, "_outputs")
    read_stream = forward(OutputVerbs.read_stream, "_outputs")
    get_event = forward(OutputVerbs.get_event, "_outputs")
    list_search_attributes = forward(OutputVerbs.list_search_attributes, "_outputs")
