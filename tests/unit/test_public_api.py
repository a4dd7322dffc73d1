"""The public surface is deliberate: this pins it."""

from __future__ import annotations

import sagaway as sw

EXPECTED = {
    "ActivityInfo", "ActivityTimeout", "AlreadyRegistered", "CancelRequestDescription",
    "Cancelled", "CompletableError", "DefaultErrorMarshaler", "EngineUnavailable", "ErrorKind",
    "ErrorMarshaler", "ForkPlan", "ForkRefused", "IdempotencyConflict",
    "IncompletableError", "LeaseLost", "Manager", "ManagerState", "ManagerStateError",
    "NonDeterminismError", "NotRegistered", "OnConflict", "PayloadError", "PayloadKeyError",
    "Queue",
    "RetriesExhausted", "RetryPolicy", "RetryableError", "Saga", "SagawayError", "ScheduleNotFound",
    "SignalDescription", "SignalTimeout",
    "StepDescription", "StepKind", "StepStatus", "WorkflowAlreadyExists", "WorkflowCancelled",
    "WorkflowDescription", "WorkflowHandle", "WorkflowNotEnded", "WorkflowNotFound",
    "WorkflowStatus", "__version__", "activity_info",
    "ReplayReport", "deprecate_patch", "patched",
    "SyncClient", "SyncWorkflowHandle",
    "codecs",
    "AuditEntry",
    "AttributeValue", "EventNotSet", "OutputItem", "set_event", "set_search_attributes",
    "write_stream",
}  # fmt: skip


def test_exports_are_pinned() -> None:
    assert set(sw.__all__) == EXPECTED
    assert sw.__all__ == sorted(sw.__all__)
    for name in sw.__all__:
        assert hasattr(sw, name), name


def test_error_tree() -> None:
    engine_errors = [
        sw.WorkflowAlreadyExists, sw.WorkflowNotFound, sw.NotRegistered, sw.NonDeterminismError,
        sw.PayloadError, sw.SignalTimeout, sw.IdempotencyConflict, sw.ActivityTimeout,
        sw.RetriesExhausted, sw.WorkflowCancelled, sw.ManagerStateError, sw.AlreadyRegistered,
        sw.WorkflowNotEnded, sw.PayloadKeyError, sw.ScheduleNotFound, sw.EngineUnavailable,
        sw.ForkRefused,
    ]  # fmt: skip
    for cls in engine_errors:
        assert issubclass(cls, sw.SagawayError)
    assert issubclass(sw.Cancelled, BaseException) and not issubclass(sw.Cancelled, Exception)
    for cls in (sw.CompletableError, sw.RetryableError, sw.IncompletableError):
        assert not issubclass(cls, sw.SagawayError)


def test_completable_error_carries_code_and_details() -> None:
    err = sw.CompletableError("insufficient balance", code="NSF", missing=10)
    assert str(err) == "[NSF] insufficient balance"
    assert err.details == {"missing": 10}
    assert (
        sw.CompletableError().message
        == "An expected business failure; the activity or workflow completes as FAILED."
    )
