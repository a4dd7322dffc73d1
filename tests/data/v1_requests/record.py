"""Records the requests a ``sagaway.v1`` client sends, as test data for ``test_v1_replay``.

Run once, at the commit whose messages are to be kept (it was 3882cac, the last protocol with
the requests' ``now`` fields): ``python tests/data/v1_requests/record.py``. It calls the verbs
of ``GrpcStore`` with fixed ids and times, keeps the serialised request of each call (never
sending it) and writes them, in order, to ``requests.json``. The replay test sends the bytes
unchanged to a server of today's code: an old client's messages must keep working.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sagaway.states import StepKind, StepStatus, WorkflowStatus
from sagaway.store.records import (
    AuditNote,
    AuditQuery,
    Lease,
    ListQuery,
    NewWorkflow,
    QueueAdmission,
    SchedulePause,
    SchedulePut,
    ScheduleRecord,
    StepRecord,
)
from sagaway.store.remote.client import GrpcStore
from sagaway.v1 import engine_pb2 as pb

NOW = 1_000.0
FAR = 4_000_000_000.0


def _new(run_id: str, key: str) -> NewWorkflow:
    return NewWorkflow(run_id=run_id, key=key, name="replay.wf", args="{}", args_hash="h0")


def _calls(store: GrpcStore) -> list[Callable[[], Awaitable[Any]]]:
    """The verbs recorded, in order (each a thunk: its request is captured, nothing sent)."""
    lease = Lease(token="t1", owner="w1", expires_at=FAR)
    step = StepRecord(
        run_id="r1",
        call_id="1",
        kind=StepKind.ACTIVITY,
        name="act",
        status=StepStatus.COMPLETED,
        attempts=1,
        result="7",
        error=None,
        started_at=NOW,
        ended_at=NOW + 1,
    )
    note = AuditNote(entry_id="e1", action="terminate", actor="ops", reason="replay")
    schedule = ScheduleRecord(
        id="s1",
        workflow="replay.wf",
        args="{}",
        queue="default",
        cron="0 * * * *",
        timezone="UTC",
        catch_up="skip",
        paused=False,
        next_tick_at=FAR,
        created_at=NOW,
        updated_at=NOW,
    )
    s = store
    return [
        lambda: s.create_workflow(_new("r1", "k1"), now=NOW, lease=lease, replace_live=False),
        lambda: s.get_workflow("k1"),
        lambda: s.record_step(step, token="t1"),
        lambda: s.load_steps("r1"),
        lambda: s.load_steps_many(["r1"]),
        lambda: s.send_signal("k1", name="go", payload='"x"', dedupe_id="d1", now=NOW),
        lambda: s.list_signals("r1"),
        lambda: s.renew_leases(["t1"], expires_at=FAR),
        lambda: s.finish_workflow(
            "r1",
            token="t1",
            status=WorkflowStatus.COMPLETED,
            result="8",
            error=None,
            now=NOW,
            has_parent=False,
            cancel_seen=True,
        ),
        lambda: s.get_run("r1"),
        lambda: s.create_workflow(_new("r2", "k2"), now=NOW, lease=None, replace_live=False),
        lambda: s.claim_due(owner="w2", now=NOW, lease_timeout=30.0, limit=10, exclude=[]),
        lambda: s.next_due(owner="w2", queues=["default"], versions=[None]),
        lambda: s.create_workflow(_new("r3", "k3"), now=NOW, lease=None, replace_live=False),
        lambda: s.end_workflow(
            "r3", status=WorkflowStatus.TERMINATED, error=None, now=NOW, audit=note
        ),
        lambda: s.request_cancel("r2", reason="stop", now=NOW),
        lambda: s.cancel_requests(["r2"]),
        lambda: s.list_workflows(status=WorkflowStatus.TERMINATED, limit=10),
        lambda: s.list_page(ListQuery(limit=10, statuses=frozenset({WorkflowStatus.COMPLETED}))),
        lambda: s.count_by_status(),
        lambda: s.put_schedule(SchedulePut(schedule=schedule, keep_paused=False), now=NOW),
        lambda: s.set_schedule_paused(
            SchedulePause(id="s1", paused=True, next_tick_at=FAR), now=NOW
        ),
        lambda: s.list_schedules(),
        lambda: s.delete_schedule("s1"),
        lambda: s.acquire_queue_slot(
            QueueAdmission(queue="q1", holder="h1", concurrency=1, rate_per_second=None),
            expires_at=FAR,
            now=NOW,
        ),
        lambda: s.release_queue_slot("q1", holder="h1", now=NOW),
        lambda: s.list_audit(AuditQuery(limit=10)),
        lambda: s.count_purgeable(before=FAR, statuses=None),
    ]


async def main() -> None:
    recorded: list[dict[str, Any]] = []

    async def capture(method: str, request: Any, *, timeout: float | None = None) -> Any:
        recorded.append(
            {"rpc": method, "request": base64.b64encode(request.SerializeToString()).decode()}
        )
        raise _Stop

    store = GrpcStore("grpc://127.0.0.1:1")
    store._call = capture  # type: ignore[method-assign]
    for call in _calls(store):
        with contextlib.suppress(_Stop):
            await call()
    # A Batch as the client's batcher sends it: two calls in one message.
    store._unary = capture  # type: ignore[method-assign]
    with contextlib.suppress(_Stop):
        await store._many(
            [
                ("GetRun", pb.RunRequest(run_id="r1")),
                ("RetryNow", pb.RetryNowRequest(run_id="r2", now=NOW)),
            ]
        )
    out = Path(__file__).with_name("requests.json")
    out.write_text(json.dumps(recorded, indent=1) + "\n", encoding="utf-8")
    print(f"{len(recorded)} requests written to {out}")


class _Stop(Exception):
    """Ends a verb once its request is captured (nothing is sent)."""


if __name__ == "__main__":
    asyncio.run(main())
