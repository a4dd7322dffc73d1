"""The verbs both SQL stores hand to collaborators (schedules, audit trail, queue limits,
pauses, outputs): each dialect builds its five (given its way to run a transaction) and this class
forwards to them, so the forwarding is written once for both and the signatures only in the
contract."""

from __future__ import annotations

from sagaway.store.contract import AuditVerbs, QueueLimitVerbs, ScheduleVerbs
from sagaway.store.forwarding import forward
from sagaway.store.output_verbs import OutputVerbs
from sagaway.store.pause_verbs import PauseVerbs


class Collaborators:
    """Forwards the schedule, audit, queue limit and output verbs of a store to its
    collaborators."""

    def __init__(
        self,
        *,
        schedules: ScheduleVerbs,
        audit: AuditVerbs,
        queue_limits: QueueLimitVerbs,
        pauses: PauseVerbs,
        outputs: OutputVerbs,
    ) -> None:
        self._schedules = schedules
        self._pauses = pauses
        self._audit = audit
        self._queue_limits = queue_limits
        self._outputs = outputs

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
    pause_workflow = forward(PauseVerbs.pause_workflow, "_pauses")
    paused_runs = forward(PauseVerbs.paused_runs, "_pauses")
    pause_calls = forward(PauseVerbs.pause_calls, "_pauses")
    list_paused_calls = forward(PauseVerbs.list_paused_calls, "_pauses")
    publish = forward(OutputVerbs.publish, "_outputs")
    read_outputs = forward(OutputVerbs.read_outputs, "_outputs")
    read_stream = forward(OutputVerbs.read_stream, "_outputs")
    get_event = forward(OutputVerbs.get_event, "_outputs")
    list_search_attributes = forward(OutputVerbs.list_search_attributes, "_outputs")
