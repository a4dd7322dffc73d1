"""The order-saga workflow for Temporal, in its own module for Temporal's workflow sandbox.

Only deterministic code lives here: the sandbox re-imports this module for every workflow run.
The activities (which touch databases) are in ``benchmarks.temporal_adapter`` and are called by
name. ``benchmarks.workload`` holds plain constants and is passed through the sandbox.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from benchmarks import workload

TASK_QUEUE = "order-saga"

ACTIVITY_START_TO_CLOSE = timedelta(seconds=5)
"""How long one activity attempt may take before Temporal retries it. It bounds how long an
activity that was running in a killed worker stays lost (scenario C); 5 s = Sagaway's benchmark
``lease_timeout``."""

RETRY = RetryPolicy(
    maximum_attempts=workload.RETRY_MAXIMUM_ATTEMPTS,
    initial_interval=timedelta(seconds=workload.RETRY_INITIAL_INTERVAL),
    backoff_coefficient=workload.RETRY_BACKOFF_COEFFICIENT,
    non_retryable_error_types=["PaymentDeclined"],
)


@workflow.defn(name="order_saga")
class OrderSaga:
    @workflow.run
    async def run(self, wf_id: str, fail_step: str | None) -> dict[str, Any]:
        done: list[str] = []
        step = workload.STEPS[0]
        try:
            for step in workload.STEPS:
                args: list[Any] = [wf_id]
                if step == "charge_payment":
                    args.append(fail_step == "charge_payment")
                await self._activity(step, args)
                done.append(step)
        except ActivityError:
            # Saga rule: compensate the completed steps in reverse order, complete normally.
            compensated: list[str] = []
            for completed in reversed(done):
                compensation = workload.COMPENSATION_OF.get(completed)
                if compensation is not None:
                    await self._activity(compensation, [wf_id])
                    compensated.append(compensation)
            return {"status": "compensated", "failed_step": step, "compensated": compensated}
        return {"status": "completed", "steps": done}

    async def _activity(self, name: str, args: list[Any]) -> None:
        await workflow.execute_activity(
            name,
            args=args,
            start_to_close_timeout=ACTIVITY_START_TO_CLOSE,
            retry_policy=RETRY,
        )
