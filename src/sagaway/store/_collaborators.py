"""The verbs both SQL stores hand to collaborators (schedules, audit trail, queue limits,
pauses, outputs): each dialect names the package of its five classes (``PACKAGE``), and this
class builds each one on first use, given the dialect's way to run a transaction, and forwards
to it, so the building and the forwarding are written once for both and the signatures only in
the contract.

Built on first use, module and all: a store opened to read a page (``sagaway list``) never
imports the schedule, queue-limit or pause code (tests/integration/test_cli_read_path.py)."""

from __future__ import annotations

import importlib
from typing import Any, ClassVar

from sagaway.store.contract import AuditVerbs, QueueLimitVerbs, ScheduleVerbs
from sagaway.store.forwarding import forward
from sagaway.store.output_verbs import OutputVerbs
from sagaway.store.pause_verbs import PauseVerbs

KINDS: dict[str, tuple[str, str]] = {
    "_schedules": ("schedules", "Schedules"),
    "_audit": ("audit", "Audit"),
    "_queue_limits": ("queue_limits", "QueueLimits"),
    "_pauses": ("pauses", "Pauses"),
    "_outputs": ("outputs", "Outputs"),
}
"""Attribute -> (module in the dialect's package, class), each built given the dialect's way
to run a transaction (``SQLiteStore._call``, ``PostgresStore._run``)."""


class Collaborators:
    """Forwards the schedule, audit, queue limit, pause and output verbs of a store to its
    collaborators, the classes of the dialect's package ``PACKAGE``, each built on first use."""

    PACKAGE: ClassVar[str]
    """``sagaway.store.sqlite`` or ``sagaway.store.postgres``."""

    def __init__(self, run: object) -> None:
        self._collaborator_run = run
        self._collaborators: dict[str, Any] = {}

    def _collaborator(self, attr: str) -> Any:
        found = self._collaborators.get(attr)
        if found is None:  # they hold nothing but ``run``: two built at once would do no harm
            module, name = KINDS[attr]
            kind = getattr(importlib.import_module(f"{self.PACKAGE}.{module}"), name)
            found = self._collaborators[attr] = kind(self._collaborator_run)
        return found

    @property
    def _schedules(self) -> ScheduleVerbs:
        return self._collaborator("_schedules")  # type: ignore[no-any-return]

    @property
    def _audit(self) -> AuditVerbs:
        return self._collaborator("_audit")  # type: ignore[no-any-return]

    @property
    def _queue_limits(self) -> QueueLimitVerbs:
        return self._collaborator("_queue_limits")  # type: ignore[no-any-return]

    @property
    def _pauses(self) -> PauseVerbs:
        return self._collaborator("_pauses")  # type: ignore[no-any-return]

    @property
    def _outputs(self) -> OutputVerbs:
        return self._collaborator("_outputs")  # type: ignore[no-any-return]

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
