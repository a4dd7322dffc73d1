"""Long-running workflows for the kill -9 tests: python waiting_app.py DB_URL MODE KEY.

MODE "wait": start an eKYC-like review that waits for the `approval` signal; print WAITING once
it is durably WAITING, then idle until killed.
MODE "many": start MANY (default 20) reviews keyed KEY-0, KEY-1, ...; print WAITING once all
are durably WAITING (and unloaded from this process's worker), then idle until killed.
MODE "parent": start a line activation whose child blocks in its activity; print PARENT_DONE when
the parent's result arrived and CHILD_RUNNING when the child is inside its activity, then idle.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys

import sagaway as sw

manager = sw.Manager(
    sys.argv[1] if len(sys.argv) > 1 else None, lease_timeout=1.0, poll_interval=0.05
)
BLOCK_CHILD = os.environ.get("BLOCK_CHILD") == "1"
child_entered = asyncio.Event()


@dataclasses.dataclass(frozen=True)
class Approval:
    ok: bool


@manager.register_workflow(name="review")
async def review(applicant: str) -> str:
    decision = await manager.signal("approval").receive(Approval)
    return f"{applicant}: {'approved' if decision.ok else 'rejected'}"


@manager.register_activity(name="publish")
async def publish(line: str) -> str:
    if BLOCK_CHILD:
        child_entered.set()
        await asyncio.Event().wait()
    return f"published {line}"


@manager.register_workflow(name="publisher")
async def publisher(line: str) -> str:
    return await publish(line)


@manager.register_workflow(name="activation")
async def activation(line: str) -> str:
    await manager.workflow(publisher, line).execute()
    return "accepted"


async def _many_waiting(prefix: str, count: int) -> None:
    for i in range(count):
        await manager.workflow(review, f"applicant-{i}").execute(idempotency_key=f"{prefix}-{i}")
    assert manager.worker is not None
    # Polls the database and the worker: both change in the engine, not in this code.
    while (await manager.count_workflows()).get(  # noqa: ASYNC110
        sw.WorkflowStatus.WAITING, 0
    ) < count or manager.worker.running_ids:
        await asyncio.sleep(0.01)


async def main() -> None:
    mode, key = sys.argv[2], sys.argv[3]
    async with manager:
        if mode == "wait":
            handle = await manager.workflow(review, "alice").execute(idempotency_key=key)
            # Polls the database: the wait is committed by the engine's worker, not this code.
            while await handle.status() is not sw.WorkflowStatus.WAITING:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            print("WAITING", flush=True)
        elif mode == "many":
            await _many_waiting(key, int(os.environ.get("MANY", "20")))
            print("WAITING", flush=True)
        else:
            result = await manager.workflow(activation, "080-1").execute_get(idempotency_key=key)
            print("PARENT_DONE " + result, flush=True)
            await child_entered.wait()
            print("CHILD_RUNNING", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
