"""What a client reads of a durable agent run while it goes on: its model responses.

Each model request is a step whose output is the model's whole response (dumped by pydantic),
committed before the agent goes on; ``model_responses`` decodes them from a workflow's
description, in the order they were made, so a client polling ``handle.describe()`` sees the
agent's output response by response (the tool calls it asked for, its text). Token-by-token
deltas within one response are not recorded.
"""

from __future__ import annotations

import pydantic
from pydantic_ai.messages import ModelResponse

import sagaway as sw

RESPONSE: pydantic.TypeAdapter[ModelResponse] = pydantic.TypeAdapter(ModelResponse)


def model_responses(description: sw.WorkflowDescription, agent: str) -> list[ModelResponse]:
    """The responses the model of the ``DurableAgent`` named ``agent`` gave in this workflow,
    as recorded so far (compensations and failed requests left out)."""
    step_name = f"{agent}.model_request"
    return [
        RESPONSE.validate_python(step.result)
        for step in description.steps
        if step.name == step_name and step.status is sw.StepStatus.COMPLETED
    ]
