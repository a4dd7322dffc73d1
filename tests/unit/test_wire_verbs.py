"""The Store's verbs on the wire, by rule: every verb of the contract is an Engine RPC, and what
a client puts in a request (or a server in a reply) reads back as it was."""

from __future__ import annotations

from typing import Any

import pytest

from sagaway.states import WorkflowStatus
from sagaway.store.contract import CreateResult
from sagaway.store.records import (
    AuditNote,
    AuditQuery,
    ForkPayloads,
    ForkRequest,
    ListQuery,
    QueueAdmission,
    ScheduleFire,
    SchedulePause,
    SchedulePut,
    ScheduleRecord,
    StepPayloads,
    WorkflowRecord,
)
from sagaway.store.remote import wire
from sagaway.store.remote.verbs import BY_RPC, VERBS, rpc_name
from sagaway.v1 import engine_pb2 as pb
from tests.store_helpers import T0, lease, new, step

_RPCS = set(pb.DESCRIPTOR.services_by_name["Engine"].methods_by_name)
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TERMINATED"}
WRITTEN_OUT = {"Hello", "ServerTime", "Watch", "StartWorkflow", "AwaitWorkflow", "Batch"}


def _record(**changes: Any) -> WorkflowRecord:
    values: dict[str, Any] = dict(
        run_id="r1",
        key="k1",
        name="flow",
        args="{}",
        args_hash="h",
        status=WorkflowStatus.RUNNING,
        result=None,
        error=None,
        parent_key=None,
        created_at=T0,
        updated_at=T0,
        ended_at=None,
        lease_owner="w",
        lease_expires_at=T0 + 30,
        next_run_at=None,
        suspend_count=0,
    )
    values.update(changes)
    return WorkflowRecord(**values)


def test_every_rpc_is_a_store_verb_or_written_out() -> None:
    assert set(BY_RPC) | WRITTEN_OUT == _RPCS
    assert not set(BY_RPC) & WRITTEN_OUT
    assert all(BY_RPC[rpc_name(method)] is verb for method, verb in VERBS.items())


def test_no_request_carries_the_clients_clock() -> None:
    for verb in VERBS.values():
        assert "now" not in verb.request_class.DESCRIPTOR.fields_by_name, verb.rpc


ARGUMENTS: list[tuple[str, dict[str, Any]]] = [
    ("create_workflow", {"new": new("k"), "lease": lease(), "replace_live": True}),
    ("create_workflow", {"new": new("k"), "lease": None, "replace_live": False}),
    (
        "fork_workflow",
        {
            "fork": ForkRequest(
                source_run_id="s",
                run_id="r",
                key="k",
                key_space="ks",
                call_ids=("1", "2"),
                code_version=None,
                payloads=ForkPayloads("{}", (StepPayloads("1", "7", None),)),
            )
        },
    ),
    (
        "fire_schedule",
        {
            "fire": ScheduleFire(
                id="s1", tick_at=T0, next_tick_at=T0 + 60, last_tick_at=None, starts=(new("k"),)
            )
        },
    ),
    ("record_step", {"step": step("r", "1", T0), "token": "t"}),
    (
        "claim_due",
        {
            "owner": "w",
            "lease_timeout": 30.0,
            "limit": 10,
            "exclude": ["x"],
            "queues": None,
            "versions": frozenset({"v1", None}),
        },
    ),
    ("next_due", {"owner": "w", "queues": ["a", "b"], "versions": None}),
    ("purge_ended", {"before": T0, "statuses": [WorkflowStatus.FAILED], "limit": 5}),
    ("count_purgeable", {"before": T0, "statuses": None}),
    (
        "list_page",
        {
            "query": ListQuery(
                limit=3,
                statuses=frozenset({WorkflowStatus.COMPLETED, WorkflowStatus.FAILED}),
                name="n",
                after=(T0, "r9"),
                code_versions=frozenset({"v2", None}),
            )
        },
    ),
    ("list_audit", {"query": AuditQuery(limit=7, run_id="r", actions=frozenset({"cancel"}))}),
    (
        "put_schedule",
        {
            "put": SchedulePut(
                ScheduleRecord(
                    "s", "flow", "{}", "default", "* * * * *", "UTC", "skip", False, T0, T0, T0
                ),
                keep_paused=True,
            )
        },
    ),
    ("set_schedule_paused", {"change": SchedulePause("s1", paused=True, next_tick_at=T0)}),
    ("list_workflows", {"status": WorkflowStatus.WAITING, "limit": 2}),
    (
        "acquire_queue_slot",
        {
            "admission": QueueAdmission(
                queue="q", holder="h", concurrency=None, rate_per_second=2.5
            ),
            "expires_at": T0 + 30,
        },
    ),
    ("load_steps_many", {"run_ids": ["a", "b"]}),
]


@pytest.mark.parametrize(("method", "values"), ARGUMENTS, ids=[m for m, _ in ARGUMENTS])
def test_arguments_read_back_as_sent(method: str, values: dict[str, Any]) -> None:
    verb = VERBS[method]
    full = {p.name: p.default for p in verb.params} | {"now": T0} | values
    request = verb.request(full)
    parsed = verb.request_class.FromString(request.SerializeToString())
    back = verb.arguments(parsed)
    for name, value in values.items():
        if name == "statuses" and value is None:  # the client names every ended status
            value = [s for s in WorkflowStatus if s.value in ENDED]
        if isinstance(value, list):
            assert sorted(back[name]) == sorted(value), name
        else:
            assert back[name] == value, name
    assert back.get("now", None) is None  # never sent: the server's clock sets it


def test_purge_with_no_status_means_every_ended_one() -> None:
    request = VERBS["purge_ended"].request({"before": T0, "statuses": None, "limit": 1})
    assert set(request.statuses) == ENDED


def test_a_limit_past_int32_is_clamped_and_the_audit_actor_is_a_claim() -> None:
    note = AuditNote(entry_id="e", action="cancel", actor="ops", reason="r")
    request = VERBS["request_cancel"].request(
        {"run_id": "r", "reason": "x", "now": T0, "audit": note}
    )
    assert request.audit.on_behalf_of == "ops" and request.audit.entry_id == "e"
    listing = VERBS["list_workflows"].request({"status": None, "limit": 10**12})
    assert listing.limit == 2**31 - 1 and not listing.HasField("status")


RESULTS: list[tuple[str, Any]] = [
    ("create_workflow", CreateResult(_record(), created=True, replaced_run_id="old")),
    ("fork_workflow", None),
    ("fork_workflow", CreateResult(_record(), created=False)),
    ("get_workflow", None),
    ("get_run", _record(status=WorkflowStatus.COMPLETED, result="1", ended_at=T0 + 1)),
    ("list_workflows", [_record(), _record(run_id="r2")]),
    ("load_steps", [step("r1", "1", T0), step("r1", "2", T0)]),
    ("load_steps_many", {"r1": [step("r1", "1", T0)], "r2": []}),
    ("record_step", None),
    ("renew_leases", {"t1", "t2"}),
    ("claim_due", [(_record(), lease())]),
    ("next_due", None),
    ("next_due", T0),
    ("end_workflow", True),
    ("cancel_requests", {"r1": "why"}),
    ("count_by_status", {WorkflowStatus.RUNNING: 2, WorkflowStatus.FAILED: 1}),
    ("send_signal", (None, False)),
    ("send_signal", (_record(), True)),
    ("purge_ended", ["r1", "r2"]),
    ("count_purgeable", 4),
    ("acquire_queue_slot", None),
    ("acquire_queue_slot", T0 + 1),
    (
        "put_schedule",
        ScheduleRecord("s", "flow", "{}", "default", "* * * * *", "UTC", "skip", False, T0, T0, T0),
    ),
    ("set_schedule_paused", None),
]


@pytest.mark.parametrize(("method", "result"), RESULTS, ids=[m for m, _ in RESULTS])
def test_results_read_back_as_replied(method: str, result: Any) -> None:
    verb = VERBS[method]
    reply = verb.reply(result)
    parsed = verb.reply_class.FromString(reply.SerializeToString())
    assert verb.result(parsed) == result


def test_an_unknown_status_on_the_wire_names_the_known_ones() -> None:
    reply = pb.MaybeWorkflow(record=wire.workflow(_record()))
    reply.record.status = "SLEEPING"
    with pytest.raises(ValueError, match="unknown workflow status 'SLEEPING'; use one of"):
        VERBS["get_run"].result(reply)
