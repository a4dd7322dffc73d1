"""Messages of an older ``sagaway.v1`` client still work: requests recorded from the client of
the protocol whose requests carried the client's clock (``now``; see
``tests/data/v1_requests/record.py``) are sent, byte for byte, to a server of today's code,
which must answer each as it did then (its own clock acts; the old fields are ignored)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from sagaway.v1 import engine_pb2 as pb
from tests.integration.server_support import ServerProcess

pytestmark = pytest.mark.grpc

RECORDED = Path(__file__).parents[1] / "data" / "v1_requests" / "requests.json"
_METHODS = pb.DESCRIPTOR.services_by_name["Engine"].methods_by_name


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A ``sagaway server`` of today's code over a fresh SQLite database."""
    process = ServerProcess(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        yield process.wait_ready()
    finally:
        process.stop()


async def _send(channel: grpc.aio.Channel, rpc: str, request: bytes) -> Any:
    """The reply to ``request`` (raw bytes, as the old client serialised them)."""
    call = channel.unary_unary(f"/sagaway.v1.Engine/{rpc}")
    reply: bytes = await call(request, timeout=30)
    return getattr(pb, _METHODS[rpc].output_type.name).FromString(reply)


def _check(rpc: str, reply: Any, seen: dict[str, Any]) -> None:
    """What the server's answer to each recorded call must show."""
    if rpc == "CreateWorkflow":
        assert reply.created and reply.record.run_id in ("r1", "r2", "r3")
        # The lease the old client asked for ended at 4e9: the server clamped it to its own
        # max_lease from its own clock, and set the times itself (the client said 1000).
        assert reply.record.created_at > 1_000_000_000
        if reply.record.run_id == "r1":
            assert reply.record.status == "RUNNING"
            assert reply.record.lease_expires_at < 4_000_000_000
    elif rpc == "GetWorkflow":
        assert reply.record.run_id == "r1"
    elif rpc in ("LoadSteps",):
        assert [(s.call_id, s.result) for s in reply.steps] == [("1", "7")]
    elif rpc == "LoadStepsMany":
        assert [s.result for s in reply.steps["r1"].steps] == ["7"]
    elif rpc == "SendSignal":
        assert reply.stored and reply.record.run_id == "r1"
    elif rpc == "ListSignals":
        assert [(s.name, s.payload, s.dedupe_id) for s in reply.signals] == [("go", '"x"', "d1")]
        assert reply.signals[0].created_at > 1_000_000_000
    elif rpc == "RenewLeases":
        assert list(reply.tokens) == ["t1"]
    elif rpc == "GetRun":
        assert reply.record.status == "COMPLETED" and reply.record.result == "8"
        assert reply.record.ended_at > 1_000_000_000
    elif rpc == "ClaimDue":
        assert [c.record.run_id for c in reply.claimed] == ["r2"]
        seen["token"] = reply.claimed[0].lease.token
    elif rpc == "EndWorkflow" or rpc == "RequestCancel":
        assert reply.changed
    elif rpc == "CancelRequests":
        assert dict(reply.reasons) == {"r2": "stop"}
    elif rpc == "ListWorkflows":
        assert [r.run_id for r in reply.records] == ["r3"]
    elif rpc == "ListPage":
        assert [r.run_id for r in reply.records] == ["r1"]
    elif rpc == "CountByStatus":
        assert dict(reply.counts) == {"COMPLETED": 1, "RUNNING": 1, "TERMINATED": 1}
    elif rpc == "PutSchedule":
        assert reply.id == "s1" and reply.created_at > 1_000_000_000
    elif rpc == "SetSchedulePaused":
        assert reply.schedule.paused
    elif rpc == "ListSchedules":
        assert [s.id for s in reply.schedules] == ["s1"]
    elif rpc == "DeleteSchedule":
        assert reply.changed
    elif rpc == "AcquireQueueSlot":
        assert not reply.HasField("retry_at")  # admitted
    elif rpc == "ListAudit":
        assert [(e.action, e.on_behalf_of, e.run_id) for e in reply.entries] == [
            ("terminate", "ops", "r3")
        ]
        assert reply.entries[0].at > 1_000_000_000
    elif rpc == "CountPurgeable":
        assert reply.count == 2
    elif rpc == "Batch":
        assert [r.code for r in reply.results] == [0, 0]
        assert pb.MaybeWorkflow.FromString(reply.results[0].reply).record.run_id == "r1"
        assert pb.Done.FromString(reply.results[1].reply).changed is False  # r2 is running


async def test_recorded_v1_requests_are_answered(server: str) -> None:
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    assert len(recorded) >= 25
    seen: dict[str, Any] = {}
    async with grpc.aio.insecure_channel(server) as channel:
        for entry in recorded:
            rpc = entry["rpc"]
            reply = await _send(channel, rpc, base64.b64decode(entry["request"]))
            _check(rpc, reply, seen)
    assert seen["token"]  # the claim happened


def test_recorded_requests_carry_the_old_now_fields() -> None:
    """The recorded bytes are the old protocol's: some hold a field today's messages reserve."""
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    create = next(e for e in recorded if e["rpc"] == "CreateWorkflow")
    request = pb.CreateWorkflowRequest.FromString(base64.b64decode(create["request"]))
    assert request.new.run_id == "r1"
    # Field 2 was `double now`: 1000.0 as the old client sent it (0x11, then the double).
    assert b"\x11\x00\x00\x00\x00\x00\x40\x8f\x40" in base64.b64decode(create["request"])
