"""The roles matrix of the Engine Server: each role, and an unknown token, against each RPC.

``EXPECTED`` is written out here by hand, principal by principal, so that a change of the
server's table (``sagaway.server.roles.RPC_ROLES``) fails a test until this one agrees. Each
RPC is called for real on a ``sagaway server`` process with a tokens file (SQLite; the whole
matrix once more on PostgreSQL), with an empty request: a call the principal may make gets
past the door (whatever the service then says of the empty request), one it may not ends
PERMISSION_DENIED naming the principal, the call and the role it needs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sagaway import credentials
from sagaway.principals import Principal, Role
from sagaway.server import roles
from sagaway.v1 import engine_pb2 as pb
from sagaway.v1 import engine_pb2_grpc as pb_grpc
from tests.grpc_server import ServerProcess as Served

pytestmark = pytest.mark.grpc

PRINCIPALS = {
    "reader": Role.READ,
    "operator": Role.OPERATE,
    "worker": Role.WORKER,
    "admin": Role.ADMIN,
}
TOKENS = {name: f"token-of-{name}" for name in PRINCIPALS}
UNKNOWN = "a-token-nobody-was-given"
METHODS = pb.DESCRIPTOR.services_by_name["Engine"].methods_by_name

EVERYONE = frozenset(PRINCIPALS)
OPERATORS = frozenset({"operator", "admin"})
CLIENTS_AND_WORKERS = frozenset({"operator", "worker", "admin"})
WORKERS = frozenset({"worker", "admin"})
ADMINS = frozenset({"admin"})

EXPECTED: dict[str, frozenset[str]] = {
    # session
    "Hello": EVERYONE,
    "ServerTime": EVERYONE,
    "Batch": EVERYONE,
    # reads: everyone (operate and worker include read)
    "Watch": EVERYONE,
    "AwaitWorkflow": EVERYONE,
    "GetWorkflow": EVERYONE,
    "GetRun": EVERYONE,
    "ListWorkflows": EVERYONE,
    "ListPage": EVERYONE,
    "LoadSteps": EVERYONE,
    "LoadStepsMany": EVERYONE,
    "CountByStatus": EVERYONE,
    "CountPurgeable": EVERYONE,
    "ListSignals": EVERYONE,
    "ListCancelRequests": EVERYONE,
    "CancelRequests": EVERYONE,
    "ListAttemptErrors": EVERYONE,
    "ListSchedules": EVERYONE,
    "NextDue": EVERYONE,
    "ListAudit": EVERYONE,
    "ReadOutputs": EVERYONE,
    "ReadStream": EVERYONE,
    "GetEvent": EVERYONE,
    "ListSearchAttributes": EVERYONE,
    "StartPlace": EVERYONE,
    "QueuePlace": EVERYONE,
    # operator actions
    "StartWorkflow": OPERATORS,
    "RetryNow": OPERATORS,
    "PauseWorkflow": OPERATORS,
    "PauseCalls": OPERATORS,
    "PausedRuns": EVERYONE,  # every worker's heartbeat
    "ListPausedCalls": EVERYONE,
    "ForkWorkflow": OPERATORS,
    # what operators and running workflows both do
    "CreateWorkflow": CLIENTS_AND_WORKERS,
    "SendSignal": CLIENTS_AND_WORKERS,
    "RequestCancel": CLIENTS_AND_WORKERS,
    # running work
    "ClaimDue": WORKERS,
    "RenewLeases": WORKERS,
    "RecordStep": WORKERS,
    "Publish": WORKERS,
    "FinishWorkflow": WORKERS,
    "SuspendWorkflow": WORKERS,
    "ReleaseWorkflow": WORKERS,
    "WaitWorkflow": WORKERS,
    "WaitForChild": WORKERS,
    "ReceiveSignal": WORKERS,
    "AcquireQueueSlot": WORKERS,
    "RenewQueueSlot": WORKERS,
    "ReleaseQueueSlot": WORKERS,
    "LeaveQueue": WORKERS,
    "FireSchedule": WORKERS,
    "PutSchedule": WORKERS,
    # administration
    "EndWorkflow": ADMINS,
    "PurgeEnded": ADMINS,
    "SetSchedulePaused": ADMINS,
    "DeleteSchedule": ADMINS,
    "RecordAudit": ADMINS,
}
ALL_RPCS = sorted(set(METHODS) | set(roles.RPC_ROLES) | set(EXPECTED))


def tokens_file(folder: Path) -> Path:
    path = folder / "tokens.toml"
    path.write_text(
        "".join(
            credentials.toml_entry(name, [role], credentials.digest(TOKENS[name]))
            for name, role in PRINCIPALS.items()
        ),
        encoding="utf-8",
    )
    return path


# ----------------------------------------------------------------------------- the tables


@pytest.mark.parametrize("rpc", ALL_RPCS)
def test_the_servers_table_gives_each_rpc_the_expected_principals(rpc: str) -> None:
    assert rpc in METHODS, f"{rpc} is not an RPC of the proto"
    assert rpc in EXPECTED, f"{rpc} has no row in this test's EXPECTED table"
    assert rpc in roles.RPC_ROLES, f"{rpc} has no role in the server's table"
    allowed = {
        name
        for name, role in PRINCIPALS.items()
        if roles.refusal(Principal(name, frozenset({role})), rpc) is None
    }
    assert allowed == EXPECTED[rpc]
    assert roles.refusal(Principal("none", frozenset()), rpc) is None or rpc not in {
        "Hello",
        "ServerTime",
        "Batch",
    }


# ----------------------------------------------------------------------------- real calls


def _request(rpc: str) -> Any:
    request = getattr(pb, METHODS[rpc].input_type.name)()
    if rpc == "AwaitWorkflow":
        request.timeout = 0.01
    return request


async def _outcome(channel: grpc.aio.Channel, rpc: str, token: str) -> tuple[str, str]:
    """The status code's name of one call of ``rpc`` with ``token`` ("OK"), and its details."""
    stub: Any = pb_grpc.EngineStub(channel)
    metadata = (("authorization", f"Bearer {token}"),)
    try:
        if METHODS[rpc].server_streaming:
            stream = getattr(stub, rpc)(_request(rpc), metadata=metadata, timeout=10)
            async for _ in stream:
                stream.cancel()  # the first notice is enough
                break
        else:
            await getattr(stub, rpc)(_request(rpc), metadata=metadata, timeout=10)
    except grpc.aio.AioRpcError as exc:
        if exc.code() is grpc.StatusCode.CANCELLED:
            return "OK", ""
        return exc.code().name, exc.details() or ""
    return "OK", ""


async def _check_rpc(address: str, rpc: str) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        allowed = set()
        for name in PRINCIPALS:
            code, details = await _outcome(channel, rpc, TOKENS[name])
            assert code not in ("UNAUTHENTICATED", "INTERNAL"), (name, rpc, code, details)
            if code == "PERMISSION_DENIED":
                assert f"principal {name!r}" in details and f"call {rpc}:" in details, details
                assert "it needs" in details, details
            else:
                allowed.add(name)
        assert allowed == EXPECTED[rpc], rpc
        code, details = await _outcome(channel, rpc, UNKNOWN)
        assert (code, details) == ("UNAUTHENTICATED", "wrong token")


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("roles")
    with Served(f"sqlite:///{folder / 'db.sqlite'}", tokens_file=tokens_file(folder)) as server:
        yield server


@pytest.mark.parametrize("rpc", sorted(EXPECTED))
async def test_each_principal_against_each_rpc_on_sqlite(sqlite_server: Served, rpc: str) -> None:
    await _check_rpc(sqlite_server.address, rpc)


@pytest.mark.postgres
async def test_the_whole_matrix_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    with Served(postgres_url, tokens_file=tokens_file(tmp_path)) as server:
        for rpc in sorted(EXPECTED):
            await _check_rpc(server.address, rpc)


async def test_health_needs_no_token(sqlite_server: Served) -> None:
    async with grpc.aio.insecure_channel(sqlite_server.address) as channel:
        health: Any = health_pb2_grpc.HealthStub(channel)
        reply = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_create_workflow_needs_more_for_a_replacement_or_a_lease(
    sqlite_server: Served,
) -> None:
    """Starting over a live execution terminates it (admin); starting under a lease claims the
    run (worker)."""
    new = pb.NewWorkflow(run_id="r-1", key="k-1", name="w", args="{}", args_hash="h", queue="q")
    lease = pb.Lease(token="t", owner="o", expires_at=1.0)
    cases = {
        "replace": (pb.CreateWorkflowRequest(new=new, replace_live=True), ADMINS),
        "lease": (pb.CreateWorkflowRequest(new=new, lease=lease), WORKERS),
    }
    async with grpc.aio.insecure_channel(sqlite_server.address) as channel:
        stub: Any = pb_grpc.EngineStub(channel)
        for what, (request, expected) in cases.items():
            allowed = set()
            for name in PRINCIPALS:
                metadata = (("authorization", f"Bearer {TOKENS[name]}"),)
                try:
                    await stub.CreateWorkflow(request, metadata=metadata, timeout=10)
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() is grpc.StatusCode.PERMISSION_DENIED, exc.details()
                    assert "it needs" in (exc.details() or "")
                    continue
                allowed.add(name)
            assert allowed == expected, what


async def test_each_call_in_a_batch_is_judged_on_its_own(sqlite_server: Served) -> None:
    """Batch itself is open to anyone: the calls in it are not (no way around the table)."""
    calls = [
        pb.BatchCall(method=rpc, request=_request(rpc).SerializeToString())
        for rpc in ("GetWorkflow", "RequestCancel", "PurgeEnded", "ClaimDue")
    ]
    denied = grpc.StatusCode.PERMISSION_DENIED.value[0]
    async with grpc.aio.insecure_channel(sqlite_server.address) as channel:
        stub: Any = pb_grpc.EngineStub(channel)
        for name in PRINCIPALS:
            metadata = (("authorization", f"Bearer {TOKENS[name]}"),)
            reply = await stub.Batch(pb.BatchRequest(calls=calls), metadata=metadata, timeout=10)
            allowed = {
                call.method
                for call, result in zip(calls, reply.results, strict=True)
                if result.code != denied
            }
            expected = {call.method for call in calls if name in EXPECTED[call.method]}
            assert allowed == expected, name
            for result in reply.results:
                if result.code == denied:
                    assert f"principal {name!r}" in result.message
                    assert {e.key: e.value for e in result.trailing}["sagaway-error"] == (
                        b"PermissionDenied"
                    )
