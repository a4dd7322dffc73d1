"""eKYC approval: verify documents, wait hours or days for a reviewer.

    python examples/ekyc/app.py            # runs one approval and one rejection on ./sagaway.db

The workflow verifies the applicant's documents, then waits durably for the `approval` signal
(no worker and no lease held while it waits, across restarts) and approves or rejects. A
reviewer's web app sends the signal with `manager.signal("approval").send(key, Approval(...))`
or an operator with `sagaway signal KEY approval '{"approved": true, "reviewer": "rin"}'`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Coroutine
from typing import Any

import sagaway as sw

REVIEW_TIMEOUT = 3 * 86400.0
"""Seconds a reviewer has before the application expires."""


@dataclasses.dataclass(frozen=True)
class Application:
    applicant: str
    document_id: str


@dataclasses.dataclass(frozen=True)
class Approval:
    approved: bool
    reviewer: str
    reason: str = ""


class KycRejected(sw.CompletableError):
    """The identity verification was rejected."""


def build(
    manager: sw.Manager, accounts: dict[str, str]
) -> Callable[[Application], Coroutine[Any, Any, str]]:
    """Register the eKYC activities and workflow on ``manager``; ``accounts`` stands for the
    account service's table."""

    @manager.register_activity(name="kyc.verify_documents")
    async def verify_documents(app: Application) -> str:
        if not app.document_id.startswith("DOC-"):
            raise KycRejected(f"document {app.document_id!r} is unreadable", code="BAD_DOCUMENT")
        return f"checked {app.document_id}"

    @manager.register_activity(name="kyc.activate_account")
    async def activate_account(app: Application, reviewer: str) -> str:
        accounts[app.applicant] = f"active (approved by {reviewer})"
        return accounts[app.applicant]

    @manager.register_activity(name="kyc.record_rejection")
    async def record_rejection(app: Application, reason: str) -> None:
        accounts[app.applicant] = f"rejected: {reason}"

    @manager.register_workflow(name="kyc.review")
    async def review(app: Application) -> str:
        await verify_documents(app)
        try:
            decision = await manager.signal("approval").receive(Approval, timeout=REVIEW_TIMEOUT)
        except sw.SignalTimeout:
            decision = Approval(approved=False, reviewer="system", reason="no decision in 3 days")
        if not decision.approved:
            await record_rejection(app, decision.reason)
            raise KycRejected(decision.reason, code="REJECTED")
        return await activate_account(app, decision.reviewer)

    return review


async def main() -> None:
    manager = sw.Manager()
    accounts: dict[str, str] = {}
    review = build(manager, accounts)
    async with manager:
        run = f"{asyncio.get_running_loop().time():.0f}"
        decisions = {
            "alice": Approval(True, "rin"),
            "bob": Approval(False, "rin", "photo mismatch"),
        }
        for who, decision in decisions.items():
            key = f"kyc-{who}-{run}"
            application = Application(who, f"DOC-{who}")
            handle = await manager.workflow(review, application).execute(idempotency_key=key)
            # The example polls only to print the state; a real client just sends later.
            while await handle.status() is not sw.WorkflowStatus.WAITING:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            print(f"{key}: waiting for a reviewer ({await handle.status()})")
            await manager.signal("approval").send(key, decision, dedupe_id=f"review-{key}")
            try:
                print(f"{key}: {await handle.result()}")
            except KycRejected as exc:
                print(f"{key}: rejected ({exc})")
    print(accounts)


if __name__ == "__main__":
    asyncio.run(main())
