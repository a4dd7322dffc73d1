"""How ``sagaway start --wait`` and ``sagaway fork --wait`` report a workflow's end."""

from __future__ import annotations

import json
from typing import Any

import sagaway as sw


async def result_or_error(handle: sw.WorkflowHandle[Any]) -> tuple[bool, str]:
    """Wait for the workflow's end: ``(True, its result as JSON)``, or ``(False, its error)``
    when it failed or was cancelled. Sagaway's own errors (not found, ...) are raised."""
    try:
        result = await handle.result()
    except sw.WorkflowCancelled as exc:
        return False, str(exc)
    except sw.SagawayError:
        raise
    except Exception as exc:  # the workflow's own error, re-raised from its record
        return False, f"{type(exc).__name__}: {exc}"
    return True, json.dumps(result)
