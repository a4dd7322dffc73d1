"""Named parameters of the store verbs, built the same way for both SQL dialects.

The SQLite and PostgreSQL queries of one verb take the same parameter names (``:name`` and
``%(name)s``), so each dict is built here once (or, for a verb's own statement, in that verb in
``_sql_verbs``), and the records of the verbs with many arguments are defined here. What a
dialect adds (PostgreSQL's signal sender,
its batched end with the final step) stays in its store.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection, Iterable
from typing import Any

from sagaway.errors import error_record
from sagaway.states import ErrorKind, StepKind, StepStatus, WorkflowStatus
from sagaway.store.records import AuditNote, Lease, NewWorkflow, SignalReceive, StepRecord

Params = dict[str, Any]
Write = tuple[str, Params]
"""A named query (of the dialect's SQL file) and its parameters."""


def spare_key_space(new: NewWorkflow) -> str | None:
    """The key space ``insert_workflow`` gives ``new`` instead of its own when executions are
    already kept under keys derived from that one: a run that ended and was purged may leave
    behind a child that ended after it (or is still running), and the new execution's call 1
    would otherwise join that child as its own. The replacing form (``keys.key_space``), named
    after the run; None when the key space is already one (it holds ``@``) or there is none."""
    space = new.key_space
    return None if space is None or "@" in space else f"{space}@{new.run_id}"


def create(new: NewWorkflow, *, now: float, lease: Lease | None) -> Params:
    """``insert_workflow``: RUNNING under ``lease`` if given, else PENDING."""
    if new.concurrency_key is not None and new.max_per_key < 1:
        raise ValueError(f"max_per_key must be >= 1, not {new.max_per_key!r}")
    if lease is not None and (new.ordering_key is not None or new.debounce is not None):
        raise ValueError(
            "an execution with an ordering_key or a debounce is created PENDING: claims "
            "apply its order and its start"
        )
    if new.concurrency_key is not None and lease is not None:
        raise ValueError(
            "an execution with a concurrency_key is created PENDING: claims apply its limit"
        )
    # 0 stands for the default: what a client of the Engine Server that does not know these
    # fields sends (proto3 reads an absent number as 0).
    priority = new.priority if new.priority != 0 else DEFAULT_PRIORITY
    weight = new.fairness_weight if new.fairness_weight != 0 else 1.0
    if priority != DEFAULT_PRIORITY or weight != 1.0:
        check_flow(priority, weight)
    return {
        "run_id": new.run_id,
        "key": new.key,
        "name": new.name,
        "args": new.args,
        "args_hash": new.args_hash,
        "status": (WorkflowStatus.RUNNING if lease else WorkflowStatus.PENDING).value,
        "parent_key": new.parent_key,
        "queue": new.queue,
        "key_space": new.key_space,
        "spare_key_space": spare_key_space(new),
        "deadline_at": None if new.timeout is None else now + new.timeout,
        "trace_context": new.trace_context,
        "code_version": new.code_version,
        "concurrency_key": new.concurrency_key,
        "concurrency_limit": None if new.concurrency_key is None else new.max_per_key,
        "ordering_key": new.ordering_key,
        "debounce_key": new.debounce_key,
        "debounce_until": _burst_end(new, now),
        "start_at": now if new.debounce is None else now + new.debounce,
        "now": now,
        "lease_token": lease.token if lease else None,
        "lease_owner": lease.owner if lease else None,
        "lease_expires_at": lease.expires_at if lease else None,
        "priority": priority,
        "fairness_key": new.fairness_key,
        "fairness_weight": weight,
    }


def _burst_end(new: NewWorkflow, first: float) -> float | None:
    """The latest start of a burst whose first start was at ``first`` (None: no bound)."""
    if new.debounce_key is None or new.debounce_max_wait is None:
        return None
    return first + new.debounce_max_wait


def postpone(new: NewWorkflow, burst: Any, *, now: float) -> Params:
    """``postpone_burst``: the open burst ``burst`` (an ``open_burst`` row) takes ``new``'s
    arguments and starts ``new.debounce`` seconds from now, but not after the end of the burst
    (the earlier of its own and the one ``new``'s maximum wait sets from its first start)."""
    ends = [float(burst["debounce_until"])] if burst["debounce_until"] is not None else []
    bound = _burst_end(new, float(burst["created_at"]))
    if bound is not None:
        ends.append(bound)
    until = min(ends) if ends else None
    start_at = now + (new.debounce or 0.0)
    return {
        "run_id": burst["run_id"],
        "args": new.args,
        "args_hash": new.args_hash,
        "start_at": start_at if until is None else min(start_at, until),
        "debounce_until": until,
        "now": now,
    }


def start_lock(new: NewWorkflow) -> list[str]:
    """The advisory lock keys a start takes on PostgreSQL before it writes (in this order):
    its burst's, then its ordering key's line."""
    keys = []
    if new.debounce_key is not None:
        keys.append(f"debounce\x1f{new.name}\x1f{new.debounce_key}")
    if new.ordering_key is not None:
        keys.append(f"order\x1f{new.ordering_key}")
    return keys


PRIORITIES = range(1, 6)
"""The priority levels: 1 (lowest) .. 5 (highest); claims take higher levels first."""
DEFAULT_PRIORITY = 3
"""The level of a start given none (and whose workflow registered none)."""


def check_flow(priority: int, fairness_weight: float) -> None:
    """``ValueError`` unless ``priority`` is a level of ``PRIORITIES`` and ``fairness_weight``
    a positive finite number (at most 1000: a weight is a share, not a bypass)."""
    if isinstance(priority, bool) or not isinstance(priority, int) or priority not in PRIORITIES:
        raise ValueError(
            f"priority must be an int from {PRIORITIES[0]} (lowest) to {PRIORITIES[-1]} "
            f"(highest), default {DEFAULT_PRIORITY}; not {priority!r}"
        )
    if (
        isinstance(fairness_weight, bool)
        or not isinstance(fairness_weight, (int, float))
        or not 0.001 <= fairness_weight <= 1000
    ):
        raise ValueError(
            f"fairness_weight must be a number from 0.001 to 1000 (default 1), "
            f"not {fairness_weight!r}"
        )


def version_filter(versions: Collection[str | None] | None, *, arrays: bool) -> Params:
    """The ``any_version``, ``versions`` and ``unversioned`` parameters of the queries that take
    only executions of some code versions (``versions`` None: every version; None in it: the
    unversioned ones). ``arrays``: the names as a list (PostgreSQL), else a JSON array."""
    named = sorted(v for v in versions or () if v is not None)
    return {
        "any_version": versions is None,
        "versions": named if arrays else json.dumps(named),
        "unversioned": versions is not None and None in versions,
    }


def supersede(run_id: str, *, new_run_id: str, now: float) -> Params:
    """``supersede``: the live execution ``run_id`` makes room for ``new_run_id``."""
    return {"run_id": run_id, "now": now, "error": replaced_error(new_run_id)}


def replaced_error(new_run_id: str) -> str:
    """The error recorded on an execution replaced by OnConflict.TERMINATE_EXISTING."""
    return error_record(
        ErrorKind.TERMINATED,
        "sagaway.TERMINATE_EXISTING",
        f"replaced by run {new_run_id} (OnConflict.TERMINATE_EXISTING)",
    )


def wait(
    run_id: str, *, token: str, waiting_for: str, next_run_at: float | None, now: float
) -> Params:
    """``wait_owned``: WAITING for ``waiting_for`` (see ``signal_wait``, ``child_wait``)."""
    return {
        "run_id": run_id,
        "token": token,
        "waiting_for": waiting_for,
        "next_run_at": next_run_at,
        "now": now,
    }


def signal_wait(name: str) -> str:
    """What an execution waiting for the signal ``name`` waits for."""
    return f"signal:{name}"


def child_wait(child_key: str) -> str:
    """What an execution waiting for the end of its child ``child_key`` waits for."""
    return f"child:{child_key}"


def signal(run_id: str, *, name: str, payload: str, dedupe_id: str | None, now: float) -> Params:
    """``insert_signal``."""
    return {"run_id": run_id, "name": name, "payload": payload, "dedupe_id": dedupe_id, "now": now}


def wake_waiting(run_id: str, *, waiting_for: str, now: float) -> Params:
    """``wake_waiting``: due now if WAITING for ``waiting_for``."""
    return {"run_id": run_id, "now": now, "waiting_for": waiting_for}


def step(record: StepRecord) -> Params:
    """``upsert_step`` and its fenced variants."""
    return {
        "run_id": record.run_id,
        "call_id": record.call_id,
        "kind": record.kind.value,
        "name": record.name,
        "status": record.status.value,
        "attempts": record.attempts,
        "result": record.result,
        "error": record.error,
        "started_at": record.started_at,
        "ended_at": record.ended_at,
    }


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Create:
    """One ``create_workflow``: the execution, its ``insert_workflow`` parameters, and what to
    do when its key is taken (see ``Store.create_workflow``)."""

    new: NewWorkflow
    params: Params
    now: float
    replace_live: bool
    audit: AuditNote | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Due:
    """Whose due work a claim looks at: not ``owner``'s, of ``queues`` and ``versions`` (None:
    any; see ``Store.claim_due``)."""

    owner: str
    queues: Collection[str] | None
    versions: Collection[str | None] | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """One ``claim_due``: leases until ``now + lease_timeout`` on at most ``limit`` due
    executions, none of ``exclude``."""

    due: Due
    now: float
    lease_timeout: float
    limit: int
    exclude: Collection[str]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Send:
    """One ``send_signal``: a signal for the current execution under ``key`` (with ``run_id``:
    only if that is the current one), written with ``audit`` when it is stored."""

    key: str
    name: str
    payload: str
    dedupe_id: str | None
    now: float
    run_id: str | None
    audit: AuditNote | None

    def params(self, run_id: str) -> Params:
        """``insert_signal`` for the execution ``run_id``."""
        return signal(
            run_id, name=self.name, payload=self.payload, dedupe_id=self.dedupe_id, now=self.now
        )

    def wake(self, run_id: str) -> Params:
        """``wake_waiting``: the execution ``run_id`` due now if it waits for this signal."""
        return wake_waiting(run_id, waiting_for=signal_wait(self.name), now=self.now)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Receive(SignalReceive):
    """One ``receive_signal`` call: what it writes, given the signals waiting for it."""

    accept: Callable[[str], str | None]
    now: float

    @classmethod
    def of(cls, receive: SignalReceive, accept: Callable[[str], str | None], now: float) -> Receive:
        fields = {f.name: getattr(receive, f.name) for f in dataclasses.fields(SignalReceive)}
        return cls(**fields, accept=accept, now=now)

    @property
    def waiting_for(self) -> str:
        return signal_wait(self.name)

    def pending(self) -> Params:
        """``pending_signals``: the unconsumed signals of this name, in order."""
        return {"run_id": self.run_id, "name": self.name}

    def writes(self, pending: Iterable[tuple[int, str]]) -> tuple[str | None, list[Write]]:
        """The payload delivered (None if none) and the writes, in order, for ``pending``
        (id, payload) rows: signals ``accept`` refuses are rejected, the first it takes is
        consumed and recorded as the step; with none taken and ``wait``, the execution waits."""
        writes: list[Write] = []
        for signal_id, payload in pending:
            problem = self.accept(payload)
            if problem is not None:
                writes.append(
                    ("reject_signal", {"id": signal_id, "now": self.now, "error": problem})
                )
                continue
            consumed = {"id": signal_id, "call_id": self.call_id, "now": self.now}
            writes.append(("consume_signal", consumed))
            writes.append(("upsert_step", self._step(StepStatus.COMPLETED, payload, self.now)))
            return str(payload), writes
        if self.wait:
            writes.append(("upsert_step", self._step(StepStatus.WAITING, None, self.deadline)))
            waiting = wait(
                self.run_id,
                token=self.token,
                waiting_for=self.waiting_for,
                next_run_at=self.deadline,
                now=self.now,
            )
            writes.append(("wait_owned", waiting))
        return None, writes

    def _step(self, status: StepStatus, result: str | None, ended_at: float | None) -> Params:
        return step(
            StepRecord(
                run_id=self.run_id,
                call_id=self.call_id,
                kind=StepKind.SIGNAL,
                name=self.name,
                status=status,
                attempts=1,
                result=result,
                error=None,
                started_at=self.started_at,
                ended_at=ended_at,
            )
        )
