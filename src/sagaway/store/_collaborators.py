"""The verbs both SQL stores hand to collaborators (schedules, audit trail, queue limits,
pauses, outputs): each dialect names the package of its five classes (``PACKAGE``), and this
class builds each one on first use, given the dialect's way to run a transaction, and forwards
to it, so the building and the forwarding are written once for both and the signatures only in
the contract.

Built on first use, module and all: a store opened to read a page (``sagaway list``) never
imports the schedule, queue-limit or pause code (tests/integration/test_cli_read_path.py)."""

from __future__ import annotations

import importlib
from typing import ClassVar, Generic, TypeVar

from sagaway.store.contract import AuditVerbs, QueueLimitVerbs, ScheduleVerbs
from sagaway.store.forwarding import forward
from sagaway.store.output_verbs import OutputVerbs
from sagaway.store.pause_verbs import PauseVerbs

T = TypeVar("T")


class _BuiltOnFirstUse(Generic[T]):
    """A collaborator: the class ``name`` of the module ``module`` in the store's ``PACKAGE``,
    built given the store's way to run a transaction when first read, then kept in the store's
    ``__dict__`` (so later reads are plain attribute reads: the descriptor is not consulted)."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __set_name__(self, owner: type, attr: str) -> None:
        self.attr = attr

    def __get__(self, store: Collaborators, owner: type | None = None) -> T:
        kind = getattr(importlib.import_module(f"{store.PACKAGE}.{self.module}"), self.name)
        built: T = kind(store._collaborator_run)
        store.__dict__[self.attr] = built  # they hold nothing but ``run``: no race to fear
        return built


class Collaborators:
    """Forwards the schedule, audit, queue limit, pause and output verbs of a store to its
    collaborators, the classes of the dialect's package ``PACKAGE``, each built on first use."""

    PACKAGE: ClassVar[str]
    """``sagaway.store.sqlite`` or ``sagaway.store.postgres``."""

    _schedules = _BuiltOnFirstUse[ScheduleVerbs]("schedules", "Schedules")
    _audit = _BuiltOnFirstUse[AuditVerbs]("audit", "Audit")
    _queue_limits = _BuiltOnFirstUse[QueueLimitVerbs]("queue_limits", "QueueLimits")
    _pauses = _BuiltOnFirstUse[PauseVerbs]("pauses", "Pauses")
    _outputs = _BuiltOnFirstUse[OutputVerbs]("outputs", "Outputs")

    def __init__(self, run: object) -> None:
        self._collaborator_run = run

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
