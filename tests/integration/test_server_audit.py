"""The Engine Server signs the audit trail: whatever name a client gives (its principal, a
forged one in a raw request), the entry's actor is the caller the server authenticated, and
the client's name is kept only as ``on_behalf_of``; an entry whose action is not the call's,
or whose fields are malformed, is refused before anything is done; calls sent together in a
Batch are signed the same way."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

import sagaway as sw
from sagaway.principals import Principal, current_principal, local_actor, set_current_principal
from sagaway.store import open_store
from sagaway.store.records import AuditNote, AuditQuery, NewWorkflow
from sagaway.v1 import engine_pb2 as pb
from sagaway.v1 import engine_pb2_grpc as pb_grpc
from tests.grpc_server import ServerProcess

pytestmark = pytest.mark.grpc
TOKEN = "s3cret"
AUTH = (("authorization", f"Bearer {TOKEN}"),)


@pytest.fixture
def token_server(tmp_path: Path) -> Iterator[ServerProcess]:
    with ServerProcess(f"sqlite:///{tmp_path / 'db.sqlite'}", token=TOKEN) as server:
        yield server


@pytest.fixture
def open_server(tmp_path: Path) -> Iterator[ServerProcess]:
    with ServerProcess(f"sqlite:///{tmp_path / 'db.sqlite'}") as server:
        yield server


def build(url: str, **options: Any) -> sw.Manager:
    m = sw.Manager(url, poll_interval=0.05, **options)

    @m.register_workflow(name="waits")
    async def waits() -> Any:
        return await m.signal("go").receive()

    return m


async def test_a_client_cannot_name_the_actor(token_server: ServerProcess) -> None:
    previous = current_principal()
    m = build(token_server.url, token=TOKEN)
    try:
        async with m:
            await m.workflow("waits").execute(idempotency_key="w")
            set_current_principal(Principal("root"))  # the client says it is root
            assert await m.terminate("w", "as root")
            [entry] = await m.audit_log()
    finally:
        set_current_principal(previous)
    # The server checks one token, which has no name of its own: "default".
    assert (entry.actor, entry.on_behalf_of) == ("default", "root")
    assert entry.who == "root (via default)"


async def test_without_a_principal_the_client_s_own_name_is_only_a_claim(
    token_server: ServerProcess,
) -> None:
    m = build(token_server.url, token=TOKEN)
    async with m:
        await m.workflow("waits").execute(idempotency_key="w")
        assert await m.cancel("w", "no longer needed")
        [entry] = await m.audit_log()
    assert (entry.actor, entry.on_behalf_of) == ("default", local_actor())


def _note(action: str, **fields: Any) -> pb.AuditNote:
    return pb.AuditNote(entry_id=uuid.uuid4().hex, action=action, **fields)


def _cancel(run_id: str, note: pb.AuditNote) -> pb.RequestCancelRequest:
    return pb.RequestCancelRequest(run_id=run_id, reason="r", audit=note)


async def test_a_forged_or_malformed_note_is_refused_and_changes_nothing(
    token_server: ServerProcess,
) -> None:
    m = build(token_server.url, token=TOKEN)
    async with m:
        handle = await m.workflow("waits").execute(idempotency_key="w")
        run_id = handle.run_id
        assert run_id is not None
    async with grpc.aio.insecure_channel(token_server.address) as channel:
        stub = pb_grpc.EngineStub(channel)
        cancel = stub.RequestCancel
        refused: list[tuple[Any, Any]] = [
            # an action the call does not make: terminating recorded as a mere retry
            (
                stub.EndWorkflow,
                pb.EndWorkflowRequest(run_id=run_id, status="TERMINATED", audit=_note("retry")),
            ),
            (stub.RecordAudit, pb.RecordAuditRequest(audit=_note("cancel"))),
            (stub.RecordAudit, pb.RecordAuditRequest()),
            # malformed fields
            (cancel, _cancel(run_id, _note("cancel", on_behalf_of="root\x1b[2J"))),
            (cancel, _cancel(run_id, _note("cancel", details="[1, 2]"))),
            (cancel, _cancel(run_id, _note("cancel", details="{not json"))),
            (cancel, _cancel(run_id, _note("cancel", reason="x" * 1001))),
            (cancel, _cancel(run_id, pb.AuditNote(action="cancel"))),  # no entry id
        ]
        for method, request in refused:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await method(request, metadata=AUTH, timeout=10)
            assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT, caught.value
        # A raw client may claim any name: it is kept as the claim, never as the actor.
        claimed = pb.EndWorkflowRequest(
            run_id=run_id, status="TERMINATED", audit=_note("terminate", on_behalf_of="admin")
        )
        assert (await stub.EndWorkflow(claimed, metadata=AUTH, timeout=10)).changed
    async with m.connect():
        [entry] = await m.audit_log()
        assert await m.get_workflow("w").status() is sw.WorkflowStatus.TERMINATED
        assert not (await m.get_workflow("w").describe()).cancel_requests  # none went through
    assert (entry.action, entry.actor, entry.on_behalf_of) == ("terminate", "default", "admin")


async def test_calls_of_a_batch_are_signed_with_the_batch_s_caller(
    open_server: ServerProcess,
) -> None:
    store = open_store(open_server.url)
    await store.open()
    try:
        runs = []
        for i in range(6):
            new = NewWorkflow(
                run_id=uuid.uuid4().hex, key=f"k{i}", name="n", args="{}", args_hash="h"
            )
            runs.append(await store.create_workflow(new, now=0, lease=None, replace_live=False))
        notes = [
            AuditNote(entry_id=uuid.uuid4().hex, action="cancel", actor="local:me@here")
            for _ in runs
        ]
        # Made at the same moment, they travel in one Batch RPC.
        accepted = await asyncio.gather(
            *(
                store.request_cancel(r.record.run_id, reason="r", now=0, audit=n)
                for r, n in zip(runs, notes, strict=True)
            )
        )
        assert all(accepted)
        found = await store.list_audit(AuditQuery())
    finally:
        await store.close()
    assert len(found) == 6
    assert {(e.actor, e.on_behalf_of) for e in found} == {("anonymous@127.0.0.1", "local:me@here")}
