"""The errors of a durable agent run: completable ones, so the run's saga compensates."""

from __future__ import annotations

import sagaway as sw


class AgentFailed(sw.CompletableError):
    """The agent run failed (the model misbehaved, a usage limit was reached)."""


class ApprovalRejected(sw.CompletableError):
    """A person rejected a tool call that needed approval."""


class ApprovalTimedOut(sw.CompletableError):
    """No decision on a tool call that needed approval arrived in time."""


class StreamingNotDurable(sw.SagawayError):
    """A durable run records whole model responses: streaming is not available in it."""
