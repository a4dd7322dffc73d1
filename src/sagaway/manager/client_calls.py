"""The Manager's client calls: start workflows, build durable calls, send signals, watch and list.

What an application does with workflows, in or outside a workflow; an operator's verbs
(cancel, retry, fork, purge, ...) are ``OperatorCalls``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Unpack

from sagaway import _renamed, errors, listing
from sagaway._engine import context
from sagaway._engine.engine import EngineRef
from sagaway._engine.executor import current_execution
from sagaway._engine.start_options import NamedStart
from sagaway.by_name import start_by_name
from sagaway.listing import ListFilter
from sagaway.signals import Signal
from sagaway.states import WorkflowStatus
from sagaway.store.records import SignalRecord
from sagaway.updates import Update
from sagaway.workflow import (
    ActivityCall,
    WorkflowCall,
    WorkflowDescription,
    WorkflowHandle,
)


class ClientCalls:
    """Calls on the engine the Manager has open (``ref``), or makes durable in a workflow."""

    def __init__(self, ref: EngineRef) -> None:
        self._ref = ref

    def activity(
        self, fn: Callable[..., Any] | str, /, *args: Any, **kwargs: Any
    ) -> ActivityCall[Any]:
        """``Manager.activity``."""
        return ActivityCall(self._ref, fn, args, kwargs)

    def workflow(
        self, fn: Callable[..., Any] | str, /, *args: Any, **kwargs: Any
    ) -> WorkflowCall[Any]:
        """``Manager.workflow``."""
        return WorkflowCall(self._ref, fn, args, kwargs)

    async def start_by_name(
        self, name: str, kwargs: dict[str, Any] | None = None, **options: Unpack[NamedStart]
    ) -> WorkflowHandle[Any]:
        """Start a workflow known here by name only (a worker registered it), its arguments by
        parameter name as JSON values; ``result()`` returns plain JSON. A name registered here
        is started as ``workflow(name, **kwargs).execute(deadline=...)`` would. ``options``
        (``NamedStart``): ``idempotency_key``, ``task_queue`` (default ``"default"``),
        ``on_conflict`` (default ``ATTACH``), ``deadline`` (``timeout=``: its deprecated old
        name), ``reason`` (an operator's start, recorded in the audit trail with it), and
        ``ordering_key``, ``debounce_key``, ``debounce``, ``debounce_max_wait``, ``priority``,
        ``fairness_key``, ``fairness_weight`` as ``execute()`` takes them (docs/limits.md)."""
        old = options.pop("timeout", None)
        deadline = _renamed.deadline("start_by_name()", old, options.get("deadline"))
        return await start_by_name(self._ref, name, dict(kwargs or {}), options, deadline)

    def signal(self, name: str) -> Signal:
        """A named signal: ``send(key, payload)`` from anywhere, ``receive(Type)`` in a workflow."""
        return Signal(self._ref, name)

    def update(self, name: str) -> Update:
        """A named update: ``send(key, payload)`` waits for the workflow's answer,
        ``handle(fn, validator=...)`` answers it in a workflow."""
        return Update(self._ref, name)

    async def sleep(self, seconds: float) -> None:
        """A durable timer inside a workflow: a resumed workflow sleeps only what is left."""
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"sleep seconds must be a finite number >= 0, not {seconds!r}")
        execution = current_execution()
        if execution is None:
            raise errors.SagawayError(
                "manager.sleep() is a durable timer: call it inside a workflow"
            )
        call_id, _ = context.next_call_id()
        await execution.call_sleep(float(seconds), call_id)

    def get_workflow(self, key: str) -> WorkflowHandle[Any]:
        """A handle for the workflow under ``key`` (no I/O; methods raise WorkflowNotFound)."""
        return WorkflowHandle(self._ref, key)

    async def list_workflows(self, **filters: Unpack[ListFilter]) -> list[WorkflowDescription]:
        """Current workflows, newest first (steps not included). Every filter is optional
        (``ListFilter``); none given, the newest 100 of every status.

        Args:
            status: only this status, or any of these (``WorkflowStatus`` or its name).
            limit: at most this many (a page).
            name: only workflows registered under this name.
            key_prefix: only keys that start with this.
            since: only those created at or after this time (epoch seconds).
            until: only those created before this time (epoch seconds).
            after: the ``cursor`` of the last workflow of the previous page: the next page
                (keyset pagination: rows created meanwhile shift nothing, none is skipped).
            code_versions: only workflows created by these code versions (``None`` in it:
                unversioned ones).
            where: only workflows whose search attributes match: ``{"customer": "4711"}``,
                or filters as text, ``["amount>=100", "region=eu"]`` (see
                docs/search-attributes.md).
            ordering_key: only workflows started with this ``ordering_key`` (with
                ``status`` of the live ones: the key's line).
            debounce_key: only workflows started with this ``debounce_key``.
            priority: only workflows of this priority level (1..5).
            fairness_key: only workflows counted for this ``fairness_key``.

        Raises ValueError when ``after`` is not a cursor, a status is unknown or a filter is
        malformed.
        """
        return await listing.list_workflows(self._ref.require().store, **filters)

    async def list_signals(self, key: str) -> list[SignalRecord]:
        """Signals sent to the current workflow under ``key``, delivered or not, in order."""
        return await self._ref.require().list_signals(key)

    async def count_workflows(self) -> dict[WorkflowStatus, int]:
        """How many current workflows are in each status."""
        return await self._ref.require().count_by_status()
