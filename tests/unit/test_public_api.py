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
    "BatchAction", "BatchItem", "BatchOutcome", "BatchReport", "WorkflowFilter",
    "Update", "UpdateRejected", "UpdateResult",
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
        sw.ForkRefused, sw.UpdateRejected,
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


_LAZY_IMPORT = """
import json, sys
import sagaway
loaded_by_import = sorted(m for m in sys.modules if m.startswith("sagaway."))
listed = dir(sagaway)
resolved = {name: type(getattr(sagaway, name)).__name__ for name in sagaway.__all__}
namespace = {}
exec("from sagaway import *", namespace)
print(json.dumps({"loaded": loaded_by_import, "dir": listed, "resolved": resolved,
                  "star": sorted(n for n in namespace if n != "__builtins__")}))
"""


def test_import_sagaway_loads_nothing_and_every_public_name_resolves() -> None:
    """``import sagaway`` is cheap (names load on first use: every command imports it), yet
    every name of ``__all__`` resolves, ``dir()`` lists it and ``import *`` brings it."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _LAZY_IMPORT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["loaded"] == []
    assert set(seen["resolved"]) == EXPECTED
    assert seen["resolved"]["codecs"] == "module"
    assert set(seen["dir"]) >= EXPECTED
    assert set(seen["star"]) == EXPECTED


def test_an_unknown_name_is_an_attribute_error() -> None:
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        sw.Nope  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(ImportError):
        from sagaway import Nope  # type: ignore[attr-defined]  # noqa: F401
