"""A Store that seals every payload on its way in and opens it on its way out.

The audit trail is not a payload: reasons and details pass as they are (operators read the
trail without keys).

Below it (SQLite, PostgreSQL, the Engine Server) payloads are opaque text: the server never
needs a key. A payload this process cannot open is passed up sealed, unchanged; decoding it
then raises ``PayloadKeyError`` where the engine reads it (a workflow is suspended with that
error, never corrupted: written back, a sealed payload is stored as it was).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

from sagaway.codecs._chain import Chain
from sagaway.states import StepKind, WorkflowStatus
from sagaway.store.base import CreateResult, Store
from sagaway.store.records import (
    AttemptErrorRecord,
    AuditNote,
    AuditQuery,
    AuditRecord,
    CancelRequestRecord,
    Lease,
    ListQuery,
    NewWorkflow,
    ScheduleRecord,
    SignalRecord,
    StepRecord,
    WorkflowRecord,
)

R = TypeVar("R")


def _replaced(record: R, **changes: Any) -> R:
    """``record`` with ``changes`` (itself when none changes anything): a plain copy of the
    slots, several times cheaper than ``dataclasses.replace``, which runs on every read."""
    changed = {k: v for k, v in changes.items() if v is not getattr(record, k)}
    if not changed:
        return record
    cls = type(record)
    new = object.__new__(cls)
    for name in cls.__slots__:  # type: ignore[attr-defined]
        object.__setattr__(new, name, changed[name] if name in changed else getattr(record, name))
    return new


class CodecStore:
    """Wraps ``inner``; every other behaviour is the inner store's."""

    def __init__(self, inner: Store, chain: Chain) -> None:
        self.inner = inner
        self.chain = chain
        self.url = inner.url

    # ----------------------------------------------------------- record conversion

    def _wf(self, r: WorkflowRecord) -> WorkflowRecord:
        o = self.chain.try_open
        return _replaced(
            r, args=o(r.args, sealed=True) or "", result=o(r.result, sealed=True), error=o(r.error)
        )

    def _wf_opt(self, r: WorkflowRecord | None) -> WorkflowRecord | None:
        return None if r is None else self._wf(r)

    def _step_in(self, s: StepRecord) -> StepRecord:
        seal = self.chain.seal
        # A child start's result is the child's key, in clear like the key itself (the
        # workflows table holds it): a purge finds a live workflow's children by it.
        result = s.result
        return _replaced(
            s,
            result=result if result is None or s.kind is StepKind.CHILD else seal(result),
            error=None if s.error is None else seal(s.error),
        )

    def _step_out(self, s: StepRecord) -> StepRecord:
        o = self.chain.try_open
        # Sagaway seals every step result but a child start's (the child's key, in clear).
        sealed = s.kind is not StepKind.CHILD
        return _replaced(s, result=o(s.result, sealed=sealed), error=o(s.error))

    def _seal(self, text: str | None) -> str | None:
        return None if text is None else self.chain.seal(text)

    def _created(self, result: CreateResult, new: NewWorkflow, plain_hash: str) -> CreateResult:
        # The engine compares hashes to spot a reused key with other arguments: give it the
        # plain digest when the stored (keyed) hash matches these arguments.
        if result.created and result.record.run_id == new.run_id:
            # Ours: its input is what was just sealed (no need to open it again).
            record = _replaced(result.record, args=new.args, args_hash=plain_hash)
        else:
            record = self._wf(result.record)
            if record.name == new.name and self.chain.hash_matches(record.args_hash, new.args):
                record = _replaced(record, args_hash=plain_hash)
        return dataclasses.replace(result, record=record)

    # ----------------------------------------------------------- payload-carrying calls

    async def create_workflow(
        self,
        new: NewWorkflow,
        *,
        now: float,
        lease: Lease | None,
        replace_live: bool,
        audit: AuditNote | None = None,
    ) -> CreateResult:
        sealed = dataclasses.replace(
            new, args=self.chain.seal(new.args), args_hash=self.chain.args_hash(new.args)
        )
        result = await self.inner.create_workflow(
            sealed, now=now, lease=lease, replace_live=replace_live, audit=audit
        )
        return self._created(result, new, new.args_hash)

    async def fork_workflow(
        self,
        source_run_id: str,
        *,
        run_id: str,
        key: str,
        key_space: str,
        call_ids: Collection[str],
        now: float,
        code_version: str | None = None,
        audit: AuditNote | None = None,
    ) -> CreateResult | None:
        result = await self.inner.fork_workflow(
            source_run_id,
            run_id=run_id,
            key=key,
            key_space=key_space,
            call_ids=call_ids,
            now=now,
            code_version=code_version,
            audit=audit,
        )
        if result is None:
            return None
        return dataclasses.replace(result, record=self._wf(result.record))

    async def get_workflow(self, key: str) -> WorkflowRecord | None:
        return self._wf_opt(await self.inner.get_workflow(key))

    async def get_run(self, run_id: str) -> WorkflowRecord | None:
        return self._wf_opt(await self.inner.get_run(run_id))

    async def list_workflows(
        self, *, status: WorkflowStatus | None, limit: int
    ) -> list[WorkflowRecord]:
        return [self._wf(r) for r in await self.inner.list_workflows(status=status, limit=limit)]

    async def list_page(self, query: ListQuery) -> list[WorkflowRecord]:
        return [self._wf(r) for r in await self.inner.list_page(query)]

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        return [self._step_out(s) for s in await self.inner.load_steps(run_id)]

    async def load_steps_many(self, run_ids: Collection[str]) -> dict[str, list[StepRecord]]:
        found = await self.inner.load_steps_many(run_ids)
        return {run: [self._step_out(s) for s in steps] for run, steps in found.items()}

    async def record_step(self, step: StepRecord, *, token: str) -> None:
        await self.inner.record_step(self._step_in(step), token=token)

    async def finish_workflow(
        self,
        run_id: str,
        *,
        token: str,
        status: WorkflowStatus,
        result: str | None,
        error: str | None,
        now: float,
        final_step: StepRecord | None = None,
        has_parent: bool = True,
        cancel_seen: bool = False,
    ) -> None:
        await self.inner.finish_workflow(
            run_id,
            token=token,
            status=status,
            result=self._seal(result),
            error=self._seal(error),
            now=now,
            final_step=None if final_step is None else self._step_in(final_step),
            has_parent=has_parent,
            cancel_seen=cancel_seen,
        )

    async def suspend_workflow(
        self, run_id: str, *, token: str, error: str, now: float, next_run_at: float
    ) -> None:
        await self.inner.suspend_workflow(
            run_id, token=token, error=self.chain.seal(error), now=now, next_run_at=next_run_at
        )

    async def claim_due(
        self,
        *,
        owner: str,
        now: float,
        lease_timeout: float,
        limit: int,
        exclude: Collection[str],
        queues: Collection[str] | None = None,
        versions: Collection[str | None] | None = None,
    ) -> list[tuple[WorkflowRecord, Lease]]:
        claimed = await self.inner.claim_due(
            owner=owner,
            now=now,
            lease_timeout=lease_timeout,
            limit=limit,
            exclude=exclude,
            queues=queues,
            versions=versions,
        )
        return [(self._wf(r), lease) for r, lease in claimed]

    async def end_workflow(
        self,
        run_id: str,
        *,
        status: WorkflowStatus,
        error: str | None,
        now: float,
        audit: AuditNote | None = None,
    ) -> bool:
        return await self.inner.end_workflow(
            run_id, status=status, error=self._seal(error), now=now, audit=audit
        )

    async def send_signal(
        self,
        key: str,
        *,
        name: str,
        payload: str,
        dedupe_id: str | None,
        now: float,
        audit: AuditNote | None = None,
    ) -> tuple[WorkflowRecord | None, bool]:
        payload = self.chain.seal(payload)
        record, stored = await self.inner.send_signal(
            key, name=name, payload=payload, dedupe_id=dedupe_id, now=now, audit=audit
        )
        return self._wf_opt(record), stored

    async def receive_signal(
        self,
        run_id: str,
        *,
        token: str,
        name: str,
        call_id: str,
        started_at: float,
        deadline: float | None,
        wait: bool,
        accept: Callable[[str], str | None],
        now: float,
    ) -> str | None:
        opened = self.chain.try_open

        def accept_opened(payload: str) -> str | None:
            # A payload sealed beyond this process's keys raises PayloadKeyError here: the
            # read is rolled back and the workflow suspends, the signal stays pending (neither
            # rejected for good nor delivered as an envelope).
            problem = accept(self.chain.open(payload, sealed=True))
            # Why a signal was refused may quote its payload: sealed like the payload.
            return None if problem is None else self.chain.seal(problem)

        payload = await self.inner.receive_signal(
            run_id,
            token=token,
            name=name,
            call_id=call_id,
            started_at=started_at,
            deadline=deadline,
            wait=wait,
            accept=accept_opened,
            now=now,
        )
        return opened(payload, sealed=True)

    async def wait_workflow(
        self,
        run_id: str,
        *,
        token: str,
        waiting_for: str,
        next_run_at: float | None,
        step: StepRecord | None,
        now: float,
    ) -> None:
        await self.inner.wait_workflow(
            run_id,
            token=token,
            waiting_for=waiting_for,
            next_run_at=next_run_at,
            step=None if step is None else self._step_in(step),
            now=now,
        )

    async def wait_for_child(
        self, run_id: str, *, token: str, child_key: str, wait: bool, now: float
    ) -> WorkflowRecord | None:
        return self._wf_opt(
            await self.inner.wait_for_child(
                run_id, token=token, child_key=child_key, wait=wait, now=now
            )
        )

    async def list_signals(self, run_id: str) -> list[SignalRecord]:
        o = self.chain.try_open
        return [
            _replaced(s, payload=o(s.payload, sealed=True) or "", rejected=o(s.rejected))
            for s in await self.inner.list_signals(run_id)
        ]

    async def list_attempt_errors(self, run_id: str) -> list[AttemptErrorRecord]:
        o = self.chain.try_open
        return [
            _replaced(e, error=o(e.error) or "")
            for e in await self.inner.list_attempt_errors(run_id)
        ]

    # ----------------------------------------------------------- payload-free calls

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def server_time(self) -> float | None:
        return await self.inner.server_time()

    async def listen(
        self, callback: Callable[[str], None], *, owner: str | None = None, ends: bool = True
    ) -> None:
        await self.inner.listen(callback, owner=owner, ends=ends)

    async def release_workflow(self, run_id: str, *, token: str, now: float) -> None:
        await self.inner.release_workflow(run_id, token=token, now=now)

    async def renew_leases(self, tokens: Collection[str], *, expires_at: float) -> set[str]:
        return await self.inner.renew_leases(tokens, expires_at=expires_at)

    async def next_due(
        self,
        *,
        owner: str,
        queues: Collection[str] | None = None,
        versions: Collection[str | None] | None = None,
    ) -> float | None:
        return await self.inner.next_due(owner=owner, queues=queues, versions=versions)

    async def request_cancel(
        self, run_id: str, *, reason: str, now: float, audit: AuditNote | None = None
    ) -> bool:
        return await self.inner.request_cancel(run_id, reason=reason, now=now, audit=audit)

    async def cancel_requests(self, run_ids: Collection[str]) -> dict[str, str]:
        return await self.inner.cancel_requests(run_ids)

    async def list_cancel_requests(self, run_id: str) -> list[CancelRequestRecord]:
        return await self.inner.list_cancel_requests(run_id)

    async def retry_now(self, run_id: str, *, now: float, audit: AuditNote | None = None) -> bool:
        return await self.inner.retry_now(run_id, now=now, audit=audit)

    async def record_audit(self, note: AuditNote, *, target: str | None = None) -> None:
        await self.inner.record_audit(note, target=target)

    async def list_audit(self, query: AuditQuery) -> list[AuditRecord]:
        return await self.inner.list_audit(query)

    async def count_by_status(self) -> dict[WorkflowStatus, int]:
        return await self.inner.count_by_status()

    async def purge_ended(
        self, *, before: float, statuses: Collection[WorkflowStatus] | None, limit: int
    ) -> list[str]:
        return await self.inner.purge_ended(before=before, statuses=statuses, limit=limit)

    async def count_purgeable(
        self, *, before: float, statuses: Collection[WorkflowStatus] | None
    ) -> int:
        return await self.inner.count_purgeable(before=before, statuses=statuses)

    async def acquire_queue_slot(
        self,
        queue: str,
        *,
        holder: str,
        concurrency: int | None,
        rate_per_second: float | None,
        expires_at: float,
        now: float,
    ) -> float | None:
        return await self.inner.acquire_queue_slot(
            queue,
            holder=holder,
            concurrency=concurrency,
            rate_per_second=rate_per_second,
            expires_at=expires_at,
            now=now,
        )

    async def renew_queue_slot(
        self, queue: str, *, holder: str, expires_at: float, now: float
    ) -> bool:
        return await self.inner.renew_queue_slot(
            queue, holder=holder, expires_at=expires_at, now=now
        )

    async def release_queue_slot(self, queue: str, *, holder: str, now: float) -> None:
        await self.inner.release_queue_slot(queue, holder=holder, now=now)

    # ----------------------------------------------------------- schedules (their arguments)

    def _schedule(self, s: ScheduleRecord) -> ScheduleRecord:
        return _replaced(s, args=self.chain.try_open(s.args, sealed=True) or "")

    async def put_schedule(
        self,
        schedule: ScheduleRecord,
        *,
        keep_paused: bool,
        now: float,
        audit: AuditNote | None = None,
    ) -> ScheduleRecord:
        sealed = _replaced(schedule, args=self.chain.seal(schedule.args))
        stored = await self.inner.put_schedule(
            sealed, keep_paused=keep_paused, now=now, audit=audit
        )
        return self._schedule(stored)

    async def list_schedules(self) -> list[ScheduleRecord]:
        return [self._schedule(s) for s in await self.inner.list_schedules()]

    async def set_schedule_paused(
        self,
        schedule_id: str,
        *,
        paused: bool,
        next_tick_at: float,
        now: float,
        audit: AuditNote | None = None,
    ) -> ScheduleRecord | None:
        stored = await self.inner.set_schedule_paused(
            schedule_id, paused=paused, next_tick_at=next_tick_at, now=now, audit=audit
        )
        return None if stored is None else self._schedule(stored)

    async def delete_schedule(self, schedule_id: str, *, audit: AuditNote | None = None) -> bool:
        return await self.inner.delete_schedule(schedule_id, audit=audit)

    async def fire_schedule(
        self,
        schedule_id: str,
        *,
        tick_at: float,
        next_tick_at: float,
        last_tick_at: float | None,
        starts: Sequence[NewWorkflow],
        now: float,
    ) -> bool:
        sealed = [
            dataclasses.replace(
                new, args=self.chain.seal(new.args), args_hash=self.chain.args_hash(new.args)
            )
            for new in starts
        ]
        return await self.inner.fire_schedule(
            schedule_id,
            tick_at=tick_at,
            next_tick_at=next_tick_at,
            last_tick_at=last_tick_at,
            starts=sealed,
            now=now,
        )
