"""Sagas for AI agents (``pip install 'sagaway[agents]'``): a Pydantic AI agent run inside a
workflow, each model request and tool call a durable step, tools that declare compensations,
and tool calls that wait durably for a person's approval. See docs/agents.md.
"""

from __future__ import annotations

from sagaway.agents import _extra  # noqa: F401 - first: fails with what to install
from sagaway.agents._durable import Approval, ApprovalRequest, DurableAgent, TextDelta
from sagaway.agents._errors import (
    AgentFailed,
    ApprovalRejected,
    ApprovalTimedOut,
    StreamingNotDurable,
)
from sagaway.agents._reading import model_responses

__all__ = [
    "AgentFailed",
    "Approval",
    "ApprovalRejected",
    "ApprovalRequest",
    "ApprovalTimedOut",
    "DurableAgent",
    "StreamingNotDurable",
    "TextDelta",
    "model_responses",
]
