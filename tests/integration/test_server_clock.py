"""The Engine Server owns time: a client's ``now`` and lease lengths decide no lease or timer.

A token holder (or a client whose clock is wrong) sends raw calls with ``now`` far ahead (the
field requests had before the protocol dropped it: ``_old_now``) and
leases that would last for decades: it takes no live lease, makes no timer due early, holds no
lease longer than ``--max-lease``; a run whose holder died is still recovered after the server's
lease time, whatever the recovering client's clock says.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

import sagaway as sw
from sagaway.v1 import engine_pb2 as pb
from sagaway.v1 import engine_pb2_grpc as pb_grpc
from tests.grpc_server import ServerProcess

pytestmark = pytest.mark.grpc
TOKEN = "s3cret"
AUTH = (("authorization", f"Bearer {TOKEN}"),)
MAX_LEASE = 60.0
YEARS = 30 * 365 * 86400.0
"""About thirty years: the attack's lease ended in 2058."""


@pytest.fixture(
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    ids=["grpc+sqlite", "grpc+postgres"],
)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'db.sqlite'}"
    else:
        yield request.getfixturevalue("postgres_url")


@pytest.fixture
def server(database: str) -> Iterator[ServerProcess]:
    """A server of its own (the default: the server's clock), leases at most MAX_LEASE s."""
    with ServerProcess(database, token=TOKEN, max_lease=MAX_LEASE) as served:
        yield served


@pytest.fixture
async def stub(server: ServerProcess) -> AsyncIterator[pb_grpc.EngineStub]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield pb_grpc.EngineStub(channel)


def _old_now(request: Any, number: int, now: float) -> Any:
    """``request`` as an older client sent it, with its ``now`` (field ``number``, reserved
    today): the server reads the bytes and must act at its own time."""
    extra = bytes([number << 3 | 1]) + struct.pack("<d", now)  # wire type 1: a double
    return type(request).FromString(request.SerializeToString() + extra)


async def _server_now(stub: pb_grpc.EngineStub) -> float:
    reply = await stub.ServerTime(pb.ServerTimeRequest(), timeout=10, metadata=AUTH)
    return reply.now


async def _start(stub: pb_grpc.EngineStub, key: str) -> None:
    request = pb.StartWorkflowRequest(name="flow", key=key, args="{}")
    await stub.StartWorkflow(request, timeout=10, metadata=AUTH)


async def _claim(
    stub: pb_grpc.EngineStub, owner: str, *, now: float, lease_timeout: float
) -> list[pb.Claimed]:
    request = _old_now(
        pb.ClaimDueRequest(owner=owner, lease_timeout=lease_timeout, limit=10, any_queue=True),
        2,
        now,
    )
    reply = await stub.ClaimDue(request, timeout=10, metadata=AUTH)
    return list(reply.claimed)


async def _claim_new(
    stub: pb_grpc.EngineStub, owner: str, lease_timeout: float, *, ahead: float = 0.0
) -> pb.Claimed:
    """Claim the run just started: its due time is the database's now, which the server's
    clock (the database's, read through an offset measured at start) reaches within
    milliseconds."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        now = time.time() + ahead
        claimed = await _claim(stub, owner, now=now, lease_timeout=lease_timeout)
        if claimed:
            [one] = claimed
            return one
        await asyncio.sleep(0.01)
    raise AssertionError("the run just started was never claimed")


async def _record(stub: pb_grpc.EngineStub, key: str) -> pb.WorkflowRecord:
    reply = await stub.GetWorkflow(pb.KeyRequest(key=key), timeout=10, metadata=AUTH)
    assert reply.HasField("record")
    return reply.record


async def test_claim_with_now_far_ahead_takes_no_live_lease(stub: pb_grpc.EngineStub) -> None:
    await _start(stub, "live")
    held = await _claim_new(stub, "worker-a", 30.0)
    # A suspended run due in ten minutes: a timer.
    await _start(stub, "timer")
    timer = await _claim_new(stub, "worker-a", 30.0)
    await stub.SuspendWorkflow(
        pb.SuspendWorkflowRequest(
            run_id=timer.record.run_id,
            token=timer.lease.token,
            error='{"type": "Boom", "message": "retry later"}',
            next_run_at=await _server_now(stub) + 600,
        ),
        timeout=10,
        metadata=AUTH,
    )

    stolen = await _claim(stub, "thief", now=time.time() + YEARS, lease_timeout=YEARS)

    assert stolen == []
    record = await _record(stub, "live")
    assert record.lease_owner == "worker-a"
    assert (await _record(stub, "timer")).status == "SUSPENDED"
    # The live worker is not fenced off: it finishes its run.
    await stub.FinishWorkflow(
        pb.FinishWorkflowRequest(
            run_id=held.record.run_id, token=held.lease.token, status="COMPLETED", result="1"
        ),
        timeout=10,
        metadata=AUTH,
    )
    assert (await _record(stub, "live")).status == "COMPLETED"


async def test_leases_asked_for_decades_are_clamped(stub: pb_grpc.EngineStub) -> None:
    await _start(stub, "greedy")
    before = await _server_now(stub)
    claimed = await _claim_new(stub, "worker-a", YEARS, ahead=YEARS)
    after = await _server_now(stub)
    assert before + MAX_LEASE <= claimed.lease.expires_at <= after + MAX_LEASE
    assert (await _record(stub, "greedy")).lease_expires_at == claimed.lease.expires_at

    kept = await stub.RenewLeases(
        pb.RenewLeasesRequest(tokens=[claimed.lease.token], expires_at=time.time() + YEARS),
        timeout=10,
        metadata=AUTH,
    )
    assert list(kept.tokens) == [claimed.lease.token]
    renewed = (await _record(stub, "greedy")).lease_expires_at
    assert renewed <= await _server_now(stub) + MAX_LEASE

    # A run created RUNNING under a lease of the client's making is clamped too.
    created = await stub.CreateWorkflow(
        _old_now(
            pb.CreateWorkflowRequest(
                new=pb.NewWorkflow(
                    run_id="r-created", key="created", name="flow", args="{}", args_hash="h"
                ),
                lease=pb.Lease(token="t-created", owner="worker-a", expires_at=time.time() + YEARS),
            ),
            2,
            time.time() + YEARS,
        ),
        timeout=10,
        metadata=AUTH,
    )
    assert created.record.lease_expires_at <= await _server_now(stub) + MAX_LEASE
    assert created.record.created_at <= await _server_now(stub)


async def test_a_dead_holders_run_is_recovered_after_the_servers_lease(database: str) -> None:
    with ServerProcess(database, token=TOKEN, max_lease=0.5) as served:
        async with grpc.aio.insecure_channel(served.address) as channel:
            stub = pb_grpc.EngineStub(channel)
            await _start(stub, "orphan")
            # The holder asks for a lease of decades, then dies (sends nothing more).
            held = await _claim_new(stub, "dead", YEARS)
            # A recovering client whose clock is an hour behind still takes the run once the
            # server's (clamped) lease has ended: about half a second.
            deadline = time.monotonic() + 20
            taken: list[pb.Claimed] = []
            while not taken and time.monotonic() < deadline:
                taken = await _claim(stub, "rescuer", now=time.time() - 3600, lease_timeout=30.0)
                if not taken:
                    await asyncio.sleep(0.1)  # the server's clock runs: poll it
    assert [c.record.run_id for c in taken] == [held.record.run_id]
    assert taken[0].record.previous_owner == "dead"


async def test_a_manager_asking_longer_leases_than_the_server_grants_is_refused(
    server: ServerProcess,
) -> None:
    # Its leases would be shortened to MAX_LEASE while it believed them longer: it would start
    # activity attempts on runs another process may have taken over.
    manager = sw.Manager(server.url, token=TOKEN, lease_timeout=MAX_LEASE * 2)
    with pytest.raises(ValueError, match=r"lease_timeout=120 s .*--max-lease 60"):
        async with manager:
            pass
    async with sw.Manager(server.url, token=TOKEN, lease_timeout=MAX_LEASE):
        pass
