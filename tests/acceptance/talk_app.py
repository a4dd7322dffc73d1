"""Updates and pauses killed mid-way, for the kill -9 tests: python talk_app.py DB_URL MODE.

MODE=update: starts the `approvals` workflow and sends it update `approve` (id u-1); the
handler records the approval (activity `apply`), then notifies (activity `notify`), which
prints HANDLING and blocks: the process is killed between the update's acceptance and its
answer. MODE=pause: starts `paused` and `witness`, whose first activities print RUNNING and
block; pauses `paused` and prints PAUSED once the pause is recorded; the process is killed
then. Every activity appends a line to the LEDGER file, so the test counts effects across
processes. BLOCK=0 (the process that takes over) lets the activities return.
"""

from __future__ import annotations

import asyncio
import os
import sys

import sagaway as sw

manager = sw.Manager(
    sys.argv[1] if len(sys.argv) > 1 else None,
    lease_timeout=1.0,
    poll_interval=0.05,
    recovery_interval=0.1,
)
LEDGER = os.environ.get("LEDGER", "ledger.txt")
BLOCK = os.environ.get("BLOCK", "1") == "1"


def note(line: str) -> None:
    with open(LEDGER, "a", encoding="utf-8") as ledger:
        ledger.write(line + "\n")


async def block(what: str) -> None:
    if BLOCK:
        print(what, flush=True)
        await asyncio.Event().wait()


@manager.register_activity(name="apply")
async def apply(approver: str) -> str:
    note(f"apply {approver}")
    return f"approved by {approver}"


@manager.register_activity(name="notify")
async def notify(approver: str) -> None:
    note(f"notify {approver}")
    await block("HANDLING")


def check(approver: str) -> None:
    if not approver:
        raise ValueError("an approver is needed")


@manager.register_workflow(name="approvals")
async def approvals() -> str:
    async def approve(approver: str) -> str:
        answer = await apply(approver)
        await notify(approver)
        return answer

    return str(await manager.update("approve").handle(approve, validator=check))


@manager.register_activity(name="step")
async def step(name: str) -> str:
    note(f"step {name}")
    if name.endswith("1"):
        await block("RUNNING")
    return name


@manager.register_workflow(name="two_steps")
async def two_steps(prefix: str) -> list[str]:
    return [await step(f"{prefix}1"), await step(f"{prefix}2")]


async def main() -> None:
    mode = sys.argv[2]
    async with manager:
        if mode == "update":
            await manager.workflow(approvals).execute(idempotency_key="approvals")
            await manager.update("approve").send("approvals", "ann", update_id="u-1")
        else:
            await manager.workflow(two_steps, "p").execute(idempotency_key="paused")
            await manager.workflow(two_steps, "w").execute(idempotency_key="witness")
            assert await manager.pause("paused", reason="provider incident")
            print("PAUSED", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
