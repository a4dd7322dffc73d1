"""Sagas for AI agents (``pip install 'sagaway[agents]'``): a Pydantic AI agent run inside a
workflow, each model request and tool call a durable step, tools that declare compensations,
and tool calls that wait durably for a person's approval. See docs/agents.md.
"""

from __future__ import annotations

from sagaway.agents._durable import Approval, ApprovalRequest, DurableAgent
from sagaway.agents._errors import (
    AgentFailed,
    ApprovalRejected,
    ApprovalTimedOut,
    StreamingNotDurable,
)

__all__ = [
    "AgentFailed",
    "Approval",
    "ApprovalRejected",
    "ApprovalRequest",
    "ApprovalTimedOut",
    "DurableAgent",
    "StreamingNotDurable",
]
