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
from collections.abc import Callable, Collection
from typing import Any, TypeVar

from sagaway import errors
from sagaway.codecs import _places, _reseal
from sagaway.codecs._chain import Chain
from sagaway.codecs._passthrough import Passthrough
from sagaway.states import StepKind, WorkflowStatus
from sagaway.store.base import CreateResult, Store
from sagaway.store.forwarding import derived
from sagaway.store.output_verbs import all_outputs
from sagaway.store.records import (
    AttemptErrorRecord,
    AuditNote,
    ForkPayloads,
    ForkRequest,
    Lease,
    ListQuery,
    NewWorkflow,
    OutputRecord,
    Publication,
    ScheduleFire,
    SchedulePause,
    SchedulePut,
    ScheduleRecord,
    SignalReceive,
    SignalRecord,
    StepRecord,
    WorkflowRecord,
)

R = TypeVar("R")

_SEND_ROUNDS = 8
"""Bound on re-sealing a signal when the key's current execution changes under the send."""


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


class CodecStore(Passthrough):
    """Wraps ``inner``; every other behaviour is the inner store's (``Passthrough``)."""

    def __init__(self, inner: Store, chain: Chain) -> None:
        super().__init__(inner)
        self.chain = chain

    # ----------------------------------------------------------- record conversion

    def _wf(self, r: WorkflowRecord) -> WorkflowRecord:
        o = self.chain.try_open
        run = r.run_id
        return _replaced(
            r,
            args=_reseal.opened_args(self.chain, r),
            result=o(r.result, place=_places.run(run, "result"), sealed=True),
            error=o(r.error, place=_places.run(run, "error")),
        )

    def _wf_opt(self, r: WorkflowRecord | None) -> WorkflowRecord | None:
        return None if r is None else self._wf(r)

    def _step_in(self, s: StepRecord) -> StepRecord:
        seal = self.chain.seal
        # A child start's result is the child's key, in clear like the key itself (the
        # workflows table holds it): a purge finds a live workflow's children by it.
        result = s.result
        if result is not None and s.kind is not StepKind.CHILD:
            result = seal(result, place=_places.step(s, "result"))
        error = None if s.error is None else seal(s.error, place=_places.step(s, "error"))
        return _replaced(s, result=result, error=error)

    def _step_out(self, s: StepRecord) -> StepRecord:
        o = self.chain.try_open
        # Sagaway seals every step result but a child start's (the child's key, in clear).
        result = s.result
        if result is not None and s.kind is not StepKind.CHILD:
            result = o(result, place=_places.step(s, "result"), sealed=True)
        error = None if s.error is None else o(s.error, place=_places.step(s, "error"))
        return _replaced(s, result=result, error=error)

    def _seal(self, text: str | None, run_id: str, field: str) -> str | None:
        return None if text is None else self.chain.seal(text, place=_places.run(run_id, field))

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

    async def _create(self, values: dict[str, Any]) -> CreateResult:
        new = values["new"]
        result = await self.inner.create_workflow(**{**values, "new": self._new(new)})
        return self._created(result, new, new.args_hash)

    create_workflow = derived(Store.create_workflow, _create)

    def _new(self, new: NewWorkflow) -> NewWorkflow:
        return dataclasses.replace(
            new,
            args=self.chain.seal(new.args, place=_new_args_place(new)),
            args_hash=self.chain.args_hash(new.args),
        )

    async def fork_workflow(
        self, fork: ForkRequest, *, now: float, audit: AuditNote | None = None
    ) -> CreateResult | None:
        # The source's payloads are bound to the source's run: the fork stores them sealed
        # again for its own, in its transaction (see _reseal). ``payloads`` given here are
        # plain, and sealed for the fork.
        source = await self.inner.get_run(fork.source_run_id)
        sealed = None
        if source is not None:
            sealed = await self._fork_payloads(source, fork)
        result = await self.inner.fork_workflow(
            dataclasses.replace(fork, payloads=sealed), now=now, audit=audit
        )
        if result is None:
            return None
        return dataclasses.replace(result, record=self._wf(result.record))

    async def _fork_payloads(self, source: WorkflowRecord, fork: ForkRequest) -> ForkPayloads:
        """The fork's arguments, kept steps' payloads and kept publications' values, sealed
        for its run (see ``_reseal``)."""
        steps = await self.inner.load_steps(source.run_id)
        given = fork.payloads
        sealed = _reseal.fork_payloads(
            self.chain, source, steps, run_id=fork.run_id, call_ids=fork.call_ids, given=given
        )
        if not fork.call_ids:
            return sealed
        outputs = await all_outputs(self.inner, source.run_id)
        values = _reseal.output_payloads(
            self.chain, source, outputs, run_id=fork.run_id, call_ids=fork.call_ids, given=given
        )
        return dataclasses.replace(sealed, outputs=values)

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

    async def _finish(self, values: dict[str, Any]) -> None:
        run_id, step = values["run_id"], values["final_step"]
        values["result"] = self._seal(values["result"], run_id, "result")
        values["error"] = self._seal(values["error"], run_id, "error")
        values["final_step"] = None if step is None else self._step_in(step)
        await self.inner.finish_workflow(**values)

    finish_workflow = derived(Store.finish_workflow, _finish)

    async def _suspend(self, values: dict[str, Any]) -> None:
        values["error"] = self._seal(values["error"], values["run_id"], "error")
        await self.inner.suspend_workflow(**values)

    suspend_workflow = derived(Store.suspend_workflow, _suspend)

    async def _claim(self, values: dict[str, Any]) -> list[tuple[WorkflowRecord, Lease]]:
        return [(self._wf(r), lease) for r, lease in await self.inner.claim_due(**values)]

    claim_due = derived(Store.claim_due, _claim)

    async def _end(self, values: dict[str, Any]) -> bool:
        values["error"] = self._seal(values["error"], values["run_id"], "error")
        return await self.inner.end_workflow(**values)

    end_workflow = derived(Store.end_workflow, _end)

    async def _send(self, values: dict[str, Any]) -> tuple[WorkflowRecord | None, bool]:
        # Sealed for the run it is stored in: the current one under the key, which the store
        # checks in the transaction that stores it. Should the key have moved to another run
        # meanwhile (a replacement), the payload is sealed again for that one.
        key, name, payload, run_id = (values[k] for k in ("key", "name", "payload", "run_id"))
        target = run_id
        if target is None:
            current = await self.inner.get_workflow(key)
            if current is None or current.status.ended:
                return self._wf_opt(current), False
            target = current.run_id
        for _ in range(_SEND_ROUNDS):
            sealed = self.chain.seal(payload, place=_places.signal(target, name))
            values.update(payload=sealed, run_id=target)
            record, stored = await self.inner.send_signal(**values)
            moved = record is not None and record.run_id != target and not record.status.ended
            if not moved or run_id is not None:
                return self._wf_opt(record), stored
            assert record is not None
            target = record.run_id
        raise errors.SagawayError(
            f"the execution under key {key!r} kept changing while signal {name!r} was sent; "
            "send it again"
        )

    send_signal = derived(Store.send_signal, _send)

    async def receive_signal(
        self, receive: SignalReceive, *, accept: Callable[[str], str | None], now: float
    ) -> str | None:
        run_id, name = receive.run_id, receive.name
        opened = self.chain.try_open
        place = _places.signal(run_id, name)

        def accept_opened(payload: str) -> str | None:
            # A payload sealed beyond this process's keys (or for another place) raises
            # PayloadError here: the read is rolled back and the workflow suspends, the signal
            # stays pending (neither rejected for good nor delivered as an envelope).
            problem = accept(self.chain.open(payload, place=place, sealed=True))
            # Why a signal was refused may quote its payload: sealed like the payload.
            if problem is None:
                return None
            return self.chain.seal(problem, place=_places.signal_rejected(run_id, name))

        payload = await self.inner.receive_signal(receive, accept=accept_opened, now=now)
        return opened(payload, place=place, sealed=True)

    async def _wait(self, values: dict[str, Any]) -> None:
        step = values["step"]
        values["step"] = None if step is None else self._step_in(step)
        await self.inner.wait_workflow(**values)

    wait_workflow = derived(Store.wait_workflow, _wait)

    async def _wait_for_child(self, values: dict[str, Any]) -> WorkflowRecord | None:
        return self._wf_opt(await self.inner.wait_for_child(**values))

    wait_for_child = derived(Store.wait_for_child, _wait_for_child)

    async def list_signals(self, run_id: str) -> list[SignalRecord]:
        o = self.chain.try_open
        return [
            _replaced(
                s,
                payload=o(s.payload, place=_places.signal(run_id, s.name), sealed=True) or "",
                rejected=o(s.rejected, place=_places.signal_rejected(run_id, s.name)),
            )
            for s in await self.inner.list_signals(run_id)
        ]

    async def list_attempt_errors(self, run_id: str) -> list[AttemptErrorRecord]:
        o = self.chain.try_open
        return [
            _replaced(e, error=o(e.error, place=_places.step_error(run_id, e.call_id)) or "")
            for e in await self.inner.list_attempt_errors(run_id)
        ]

    # ----------------------------------------------------------- schedules (their arguments)

    def _schedule(self, s: ScheduleRecord) -> ScheduleRecord:
        place = _places.schedule(s.id)
        return _replaced(s, args=self.chain.try_open(s.args, place=place, sealed=True) or "")

    async def put_schedule(
        self, put: SchedulePut, *, now: float, audit: AuditNote | None = None
    ) -> ScheduleRecord:
        schedule = put.schedule
        args = self.chain.seal(schedule.args, place=_places.schedule(schedule.id))
        sealed = dataclasses.replace(put, schedule=_replaced(schedule, args=args))
        stored = await self.inner.put_schedule(sealed, now=now, audit=audit)
        return self._schedule(stored)

    async def list_schedules(self) -> list[ScheduleRecord]:
        return [self._schedule(s) for s in await self.inner.list_schedules()]

    async def set_schedule_paused(
        self, change: SchedulePause, *, now: float, audit: AuditNote | None = None
    ) -> ScheduleRecord | None:
        stored = await self.inner.set_schedule_paused(change, now=now, audit=audit)
        return None if stored is None else self._schedule(stored)

    async def delete_schedule(self, schedule_id: str, *, audit: AuditNote | None = None) -> bool:
        return await self.inner.delete_schedule(schedule_id, audit=audit)

    async def fire_schedule(self, fire: ScheduleFire, *, now: float) -> bool:
        starts = tuple(self._new(new) for new in fire.starts)
        return await self.inner.fire_schedule(dataclasses.replace(fire, starts=starts), now=now)

    # ----------------------------------------------------------- outputs (attributes: clear)

    async def publish(self, publication: Publication, *, token: str, now: float) -> None:
        run, seal = publication.step.run_id, self.chain.seal
        outputs = tuple(
            _replaced(o, value=seal(o.value, place=_places.output(run, o.kind, o.name)))
            for o in publication.outputs
        )
        step = self._step_in(publication.step)
        sealed = dataclasses.replace(publication, step=step, outputs=outputs)
        await self.inner.publish(sealed, token=token, now=now)

    def _output(self, run_id: str, o: OutputRecord) -> OutputRecord:
        place = _places.output(run_id, o.kind, o.name)
        return _replaced(o, value=self.chain.try_open(o.value, place=place, sealed=True))

    async def read_outputs(self, run_id: str, *, after: int, limit: int) -> list[OutputRecord]:
        rows = await self.inner.read_outputs(run_id, after=after, limit=limit)
        return [self._output(run_id, o) for o in rows]

    async def read_stream(
        self, run_id: str, *, stream: str, offset: int, limit: int
    ) -> list[OutputRecord]:
        rows = await self.inner.read_stream(run_id, stream=stream, offset=offset, limit=limit)
        return [self._output(run_id, o) for o in rows]

    async def get_event(self, run_id: str, *, key: str) -> OutputRecord | None:
        found = await self.inner.get_event(run_id, key=key)
        return None if found is None else self._output(run_id, found)


def _new_args_place(new: NewWorkflow) -> _places.Place:
    """Where a start seals its arguments: a debounced start's for its burst, which it may
    join (``_places.burst``), any other's for its own run."""
    return _places.args_places(new.run_id, new.name, new.debounce_key)[0]
