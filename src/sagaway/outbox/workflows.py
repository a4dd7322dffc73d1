"""The old import path of ``sagaway.toolkit.outbox.workflows``.

The workflow publisher: moved to the service-side toolkit; this module keeps code that imports
it from here working, with the same objects."""

from __future__ import annotations

from sagaway.toolkit.outbox.workflows import UnroutableMessage as UnroutableMessage
from sagaway.toolkit.outbox.workflows import WorkflowPublisher as WorkflowPublisher

__all__ = ["UnroutableMessage", "WorkflowPublisher"]
