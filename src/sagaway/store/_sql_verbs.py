"""The store verbs both SQL dialects take in the same way, written once.

Each verb here turns its arguments into what the dialect runs (a record of ``_params``, a
``Fork``, the named parameters of its statement) and hands that to one hook of the dialect's
store (``_create_run``, ``_fork``, ``_finish`` ...), which holds only what differs: the transaction
and its statements. The verbs whose work differs from the first line stay in each store.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sagaway.states import WorkflowStatus
from sagaway.store import _inspect, _params, _rows
from sagaway.store._rows import Row
from sagaway.store.contract import CreateResult, Store
from sagaway.store.forwarding import derived
from sagaway.store.records import (
    AttemptErrorRecord,
    AuditNote,
    ForkRequest,
    Lease,
    ListQuery,
    QueuePlace,
    SignalReceive,
    SignalRecord,
    StepRecord,
    WorkflowRecord,
)

if TYPE_CHECKING:
    from sagaway.store._fork import Fork


class SQLVerbs(abc.ABC):
    """The shared half of ``SQLiteStore`` and ``PostgresStore``; the hooks are the other."""

    # ------------------------------------------------------------------ hooks (each dialect)

    @abc.abstractmethod
    async def _create_run(self, create: _params.Create) -> CreateResult:
        """``create_workflow``'s transaction."""

    @abc.abstractmethod
    async def _fork(self, fork: Fork) -> CreateResult | None:
        """``fork_workflow``'s transaction."""

    @abc.abstractmethod
    async def _finish(
        self, params: _params.Params, final_step: StepRecord | None, has_parent: bool
    ) -> None:
        """``finish_workflow``: ``finish_owned`` with ``params``, and ``final_step``."""

    @abc.abstractmethod
    async def _suspend(self, params: _params.Params) -> None:
        """``suspend_workflow``: ``suspend_owned`` with ``params``."""

    @abc.abstractmethod
    async def _claim(self, claim: _params.Claim) -> list[tuple[WorkflowRecord, Lease]]:
        """``claim_due``'s transaction."""

    @abc.abstractmethod
    async def _next_due(self, due: _params.Due) -> float | None:
        """``next_due``'s read."""

    @abc.abstractmethod
    async def _end(self, params: _params.Params, audit: AuditNote | None) -> bool:
        """``end_workflow``: ``end_by_request`` with ``params``, its wake-up and ``audit``."""

    @abc.abstractmethod
    async def _send(self, send: _params.Send) -> tuple[WorkflowRecord | None, bool]:
        """``send_signal``'s transaction."""

    @abc.abstractmethod
    async def _receive(self, receive: _params.Receive) -> str | None:
        """``receive_signal``'s transaction."""

    @abc.abstractmethod
    async def _wait(self, params: _params.Params, step: _params.Params | None) -> None:
        """``wait_workflow``: ``wait_owned`` with ``params``, and the step's ``upsert_step``."""

    @abc.abstractmethod
    async def list_page(self, query: ListQuery) -> list[WorkflowRecord]:
        """See ``Store.list_page``."""

    @abc.abstractmethod
    async def _read(self, query: str, params: _params.Params) -> Sequence[Row]:
        """The rows of the named query ``query``: a read of its own (no transaction to share)."""

    # ------------------------------------------------------------------ reads

    async def get_workflow(self, key: str) -> WorkflowRecord | None:
        rows = await self._read("get_current", {"key": key})
        return _rows.workflow_from_row(rows[0]) if rows else None

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        return [
            _rows.step_from_row(row) for row in await self._read("load_steps", {"run_id": run_id})
        ]

    async def list_signals(self, run_id: str) -> list[SignalRecord]:
        rows = await self._read("list_signals", {"run_id": run_id})
        return [_rows.signal_from_row(row) for row in rows]

    async def list_attempt_errors(self, run_id: str) -> list[AttemptErrorRecord]:
        rows = await self._read("list_attempt_errors", {"run_id": run_id})
        return [_inspect.attempt_error_from_row(row) for row in rows]

    async def start_place(self, run_id: str, *, now: float) -> int | None:
        rows = await self._read("start_place", {"run_id": run_id, "now": now})
        return int(rows[0]["ahead"]) if rows else None

    async def queue_place(self, run_id: str, *, now: float) -> QueuePlace | None:
        rows = await self._read("queue_place", {"run_id": run_id, "now": now})
        if not rows:
            return None
        row = rows[0]
        return QueuePlace(queue=row["queue"], priority=row["priority"], ahead=int(row["ahead"]))

    # ------------------------------------------------------------------ verbs

    async def _create_verb(self, values: _params.Params) -> CreateResult:
        params = _params.create(values["new"], now=values["now"], lease=values.pop("lease"))
        return await self._create_run(_params.Create(params=params, **values))

    create_workflow = derived(Store.create_workflow, _create_verb)

    async def fork_workflow(
        self, fork: ForkRequest, *, now: float, audit: AuditNote | None = None
    ) -> CreateResult | None:
        from sagaway.store._fork import Fork  # here: a store opened to read never forks

        return await self._fork(Fork.of(fork, now, audit))

    async def list_workflows(
        self, *, status: WorkflowStatus | None, limit: int
    ) -> list[WorkflowRecord]:
        statuses = frozenset(() if status is None else (status,))
        return await self.list_page(ListQuery(limit=limit, statuses=statuses))

    async def _finish_verb(self, values: _params.Params) -> None:
        final_step, has_parent = values.pop("final_step"), values.pop("has_parent")
        await self._finish({**values, "status": values["status"].value}, final_step, has_parent)

    finish_workflow = derived(Store.finish_workflow, _finish_verb)

    async def _suspend_verb(self, values: _params.Params) -> None:
        await self._suspend(values)

    suspend_workflow = derived(Store.suspend_workflow, _suspend_verb)

    async def _claim_verb(self, values: _params.Params) -> list[tuple[WorkflowRecord, Lease]]:
        due = _params.Due(**{name: values.pop(name) for name in ("owner", "queues", "versions")})
        return await self._claim(_params.Claim(due=due, **values))

    claim_due = derived(Store.claim_due, _claim_verb)

    async def _next_due_verb(self, values: _params.Params) -> float | None:
        return await self._next_due(_params.Due(**values))

    next_due = derived(Store.next_due, _next_due_verb)

    async def _end_verb(self, values: _params.Params) -> bool:
        audit = values.pop("audit")
        return await self._end({**values, "status": values["status"].value}, audit)

    end_workflow = derived(Store.end_workflow, _end_verb)

    # ------------------------------------------------------------------ durable waits

    async def _send_verb(self, values: _params.Params) -> tuple[WorkflowRecord | None, bool]:
        return await self._send(_params.Send(**values))

    send_signal = derived(Store.send_signal, _send_verb)

    async def receive_signal(
        self, receive: SignalReceive, *, accept: Callable[[str], str | None], now: float
    ) -> str | None:
        return await self._receive(_params.Receive.of(receive, accept, now))

    async def _wait_verb(self, values: _params.Params) -> None:
        step = values.pop("step")
        await self._wait(_params.wait(**values), _params.step(step) if step else None)

    wait_workflow = derived(Store.wait_workflow, _wait_verb)
