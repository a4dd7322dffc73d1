"""Start a workflow and wait for its end on behalf of a client that has no SDK (any language).

The server knows no workflow code: it records the execution PENDING under its key (built as
every new execution is: ``_engine.new_executions``, of the caller's code version), and a worker
of an application that registered the name runs it. A retry with the same key and
arguments finds the execution already there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from sagaway import errors
from sagaway._engine import flow, new_executions
from sagaway._engine.flow_control import FlowOptions
from sagaway._engine.options import check_deadline
from sagaway._engine.text_checks import check_key, check_name
from sagaway.server.notices import Hub, Queue
from sagaway.states import OnConflict
from sagaway.store import Store, notices
from sagaway.store.records import WorkflowRecord
from sagaway.v1 import engine_pb2 as pb

MAX_WAIT = 300.0
"""Longest an AwaitWorkflow call waits (a client wanting longer calls again)."""
_POLL = 1.0
"""Seconds between looks at the record besides the notices (PostgreSQL's may be lost)."""


class StartWorkflows:
    """StartWorkflow and AwaitWorkflow over one store."""

    def __init__(self, store: Store, hub: Hub, *, announce: bool) -> None:
        self.store = store
        self.hub = hub
        self.announce = announce

    async def start(self, request: pb.StartWorkflowRequest) -> tuple[WorkflowRecord, bool]:
        check_key(request.key, "key")
        if not request.name:
            raise ValueError("name must name a registered workflow")
        check_name(request.name, "name")
        args = request.args or "{}"
        try:
            parsed = json.loads(args)
        except ValueError as exc:
            raise ValueError(f"args is not JSON: {exc}") from None
        except RecursionError:
            raise ValueError("args nest too deeply to be read (arrays or objects)") from None
        if not isinstance(parsed, dict):
            raise ValueError("args must be a JSON object of the arguments by parameter name")
        timeout = request.timeout if request.HasField("timeout") else None
        check_deadline(timeout, "timeout (the workflow's deadline)")
        concurrency_key = request.concurrency_key if request.HasField("concurrency_key") else None
        new = new_executions.build(
            name=request.name,
            args_json=args,
            key=request.key,
            queue=request.queue or "default",
            code_version=request.code_version if request.HasField("code_version") else None,
            deadline=timeout,  # the protocol's name for the workflow's deadline
            trace_context=_trace_context(request),
            concurrency_key=concurrency_key,
            max_per_key=request.max_per_key or 1,  # 0: the default, 1
            keyed=FlowOptions(
                _optional(request, "ordering_key"),
                _optional(request, "debounce_key"),
                _optional(request, "debounce"),
                _optional(request, "debounce_max_wait"),
            ),
            flow=flow.of_start(
                request.priority or None,  # 0: the default
                request.fairness_key or None,  # "": none
                request.fairness_weight or None,  # 0: the default, 1
            ),
        )
        result = await self.store.create_workflow(
            new, now=await self._now(), lease=None, replace_live=False
        )
        record = result.record
        if result.created:
            new_executions.started(None, record.run_id, record.key, record.name)
            if self.announce:
                self.hub.publish(notices.READY)
            return record, True
        if new.debounce_key is not None:
            new_executions.taken(record, new, OnConflict.ATTACH)  # joined its burst's run
        else:
            new_executions.check_same(record, new, "key")
        return record, False

    async def wait(self, key: str, timeout: float) -> WorkflowRecord:
        """The execution under ``key`` once ended, or as it is after ``timeout`` seconds."""
        if timeout < 0:
            raise ValueError("timeout must not be negative")
        loop = asyncio.get_running_loop()
        end = loop.time() + min(timeout, MAX_WAIT)
        queue = self.hub.subscribe()
        try:
            while True:
                record = await self.store.get_workflow(key)
                if record is None:
                    raise errors.WorkflowNotFound(key)
                left = end - loop.time()
                if record.status.ended or left <= 0:
                    return record
                await self._until_ended(queue, record.run_id, min(left, _POLL))
        finally:
            self.hub.unsubscribe(queue)

    async def _until_ended(self, queue: Queue, run_id: str, limit: float) -> None:
        ended = notices.Ended(run_id)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(limit):
                while (notice := await queue.get()) != ended:
                    if notice is None:
                        return  # the server is stopping: the caller reads the record once more
                    self.hub.taken(queue, notice)

    async def _now(self) -> float:
        now = await self.store.server_time()
        return now if now is not None else time.time()


def _trace_context(request: pb.StartWorkflowRequest) -> str | None:
    """The caller's trace context, checked to be a JSON object of strings."""
    if not request.HasField("trace_context"):
        return None
    try:
        carrier = json.loads(request.trace_context)
    except ValueError as exc:
        raise ValueError(f"trace_context is not JSON: {exc}") from None
    if not isinstance(carrier, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in carrier.items()
    ):
        raise ValueError('trace_context must be a JSON object of strings ({"traceparent": ...})')
    return request.trace_context


def _optional(request: pb.StartWorkflowRequest, field: str) -> Any:
    """An optional field of ``request``: None when absent."""
    return getattr(request, field) if request.HasField(field) else None  # type: ignore[arg-type]
