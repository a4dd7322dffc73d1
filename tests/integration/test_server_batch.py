"""The Batch RPC: calls made at the same moment travel together, each with its own outcome."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

import sagaway as sw
from sagaway import errors
from sagaway.store.grpc import GrpcStore
from sagaway.v1 import engine_pb2 as pb
from sagaway.v1 import engine_pb2_grpc as pb_grpc
from tests.grpc_server import ServerProcess
from tests.store_helpers import T0, running, step

pytestmark = pytest.mark.grpc


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServerProcess]:
    with ServerProcess(f"sqlite:///{tmp_path / 'db.sqlite'}") as server:
        yield server


@pytest.fixture
async def store(served: ServerProcess) -> AsyncIterator[GrpcStore]:
    opened = GrpcStore(served.url)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


def _call(method: str, request: Any) -> pb.BatchCall:
    return pb.BatchCall(method=method, request=request.SerializeToString())


async def test_each_call_of_a_batch_gets_its_own_outcome(
    served: ServerProcess, store: GrpcStore
) -> None:
    held = await running(store, "k1")
    record = await store.get_workflow("k1")
    assert record is not None
    good_step = pb.RecordStepRequest(
        step=pb.StepRecord(
            run_id=record.run_id,
            call_id="1",
            kind="activity",
            name="charge",
            status="COMPLETED",
            attempts=1,
            result='"ok"',
            started_at=T0,
            ended_at=T0,
        ),
        token=held.token,
    )
    stale = pb.RecordStepRequest()
    stale.CopyFrom(good_step)
    stale.token = "not-the-lease"
    calls = [
        _call("GetWorkflow", pb.KeyRequest(key="k1")),
        _call("RecordStep", good_step),
        _call("RecordStep", stale),
        _call("Hello", pb.HelloRequest(protocol_version=1)),
        _call("NoSuchCall", pb.Empty()),
        pb.BatchCall(method="GetRun", request=b"\xff\xff\xff"),
        _call("GetWorkflow", pb.KeyRequest(key="bad\x00key")),
    ]
    async with grpc.aio.insecure_channel(served.address) as channel:
        reply = await pb_grpc.EngineStub(channel).Batch(pb.BatchRequest(calls=calls), timeout=10)
    codes = [grpc.StatusCode.OK if r.code == 0 else _code(r.code) for r in reply.results]
    assert codes == [
        grpc.StatusCode.OK,
        grpc.StatusCode.OK,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.INVALID_ARGUMENT,
    ]
    found = pb.MaybeWorkflow.FromString(reply.results[0].reply)
    assert found.record.key == "k1" and found.record.status == "RUNNING"
    lost = reply.results[2]
    assert lost.message.startswith("lease lost")
    assert {e.key: e.value for e in lost.trailing}["sagaway-error"] == b"LeaseLost"
    assert "cannot be batched" in reply.results[3].message
    assert "Traceback" not in "".join(r.message for r in reply.results)
    # The good write happened, the stale one did not.
    steps = await store.load_steps(record.run_id)
    assert [(s.call_id, s.result) for s in steps] == [("1", '"ok"')]


def _code(value: int) -> grpc.StatusCode:
    return next(code for code in grpc.StatusCode if code.value[0] == value)


async def test_concurrent_calls_travel_together_and_keep_their_errors(
    store: GrpcStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: Counter[str] = Counter()
    real = GrpcStore._unary

    async def counting(self: GrpcStore, method: str, request: Any, timeout: Any = None) -> Any:
        sent[method] += 1
        return await real(self, method, request, timeout)

    monkeypatch.setattr(GrpcStore, "_unary", counting)
    leases = [await running(store, f"c{i}") for i in range(40)]
    records = [await store.get_workflow(f"c{i}") for i in range(40)]
    sent.clear()
    outcomes = await asyncio.gather(
        *(
            store.record_step(step(r.run_id, "1", T0), token=held.token if i % 2 == 0 else "stale")
            for i, (r, held) in enumerate(zip(records, leases, strict=True))
            if r is not None
        ),
        return_exceptions=True,
    )
    assert sent["Batch"] >= 1 and sum(sent.values()) < 40  # fewer round trips than calls
    assert [o is None for o in outcomes] == [i % 2 == 0 for i in range(40)]
    lost = [o for o in outcomes if o is not None]
    assert all(isinstance(o, errors.LeaseLost) for o in lost)
    assert {o.run_id for o in lost if isinstance(o, errors.LeaseLost)} == {
        r.run_id for i, r in enumerate(records) if r is not None and i % 2 == 1
    }


async def test_workflows_in_flight_share_round_trips(
    served: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: Counter[str] = Counter()
    real = GrpcStore._many

    async def counting(self: GrpcStore, calls: list[tuple[str, Any]]) -> list[Any]:
        sent["batches"] += 1
        sent["calls"] += len(calls)
        return await real(self, calls)

    monkeypatch.setattr(GrpcStore, "_many", counting)
    manager = sw.Manager(served.url)

    @manager.register_activity
    async def add(a: int, b: int) -> int:
        return a + b

    @manager.register_workflow
    async def total(n: int) -> int:
        return await add(await add(n, 1), 1)

    async with manager:
        handles = [
            await manager.workflow(total, i).execute(idempotency_key=f"t{i}") for i in range(60)
        ]
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60)
    assert results == [i + 2 for i in range(60)]
    assert sent["batches"] >= 1 and sent["calls"] > sent["batches"]
