"""The calls behind ``manager.activity()`` / ``manager.workflow()`` and workflow handles."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, Unpack, cast

from sagaway import _renamed, descriptions, errors, search, serialization, streams, updates
from sagaway._engine import audit, context, end_wait, flow, history, outages, pausing, replaying
from sagaway._engine.executor import Execution, current_execution
from sagaway._engine.flow_control import FlowOptions
from sagaway._engine.options import check_deadline
from sagaway._engine.start_options import (
    PLACING,
    Asked,
    StartPlacing,
    split_placing,
)
from sagaway.activity_calls import ActivityCall as ActivityCall  # re-exported
from sagaway.activity_calls import PendingCall
from sagaway.activity_calls import activity_wrapper as activity_wrapper  # re-exported
from sagaway.descriptions import SignalDescription as SignalDescription  # re-exported
from sagaway.descriptions import StepDescription as StepDescription  # re-exported
from sagaway.descriptions import WorkflowDescription as WorkflowDescription  # re-exported
from sagaway.descriptions import parse_cursor as parse_cursor  # re-exported
from sagaway.randomness import new_id
from sagaway.registry import WorkflowDef
from sagaway.states import OnConflict, WorkflowStatus
from sagaway.store.records import AuditNote, WorkflowRecord
from sagaway.updates import UpdateOptions, UpdateResult

if TYPE_CHECKING:
    from sagaway._engine.engine import EngineRef

R = TypeVar("R")
T = TypeVar("T")


class WorkflowHandle(Generic[R]):
    """A workflow execution, named by its key."""

    def __init__(
        self,
        engines: EngineRef,
        key: str,
        run_id: str | None = None,
        *,
        child_of: WorkflowDef | None = None,
    ) -> None:
        self._engines = engines
        self.key = key
        self.run_id = run_id
        """The execution this handle was started for (None: whatever is current under key)."""
        self._child_def = child_of

    def __repr__(self) -> str:
        return f"WorkflowHandle(key={self.key!r})"

    async def _record(self) -> WorkflowRecord:
        engine = self._engines.require()
        if self.run_id is not None:
            record = await engine.get_run(self.run_id)
            if record is None:
                raise errors.WorkflowNotFound(self.key)
            return record
        return await engine.get(self.key)

    async def _ride(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``, tried again through an outage (``EngineUnavailable`` past the
        Manager's ``unavailable_timeout``)."""
        return await outages.ride(self._engines.require(), f"{what} {self.key!r}", call)

    async def status(self) -> WorkflowStatus:
        return (await self._ride("status of workflow", self._record)).status

    async def describe(self) -> WorkflowDescription:
        return await self._ride("describe workflow", self._describe)

    async def _describe(self) -> WorkflowDescription:
        engine = self._engines.require()
        return await descriptions.read(engine.store, await self._record(), now=engine.clock.now())

    async def export_history(self) -> dict[str, Any]:
        """This execution's record and recorded steps as a JSON-ready document (what
        ``sagaway show KEY --export`` writes; ``sagaway.testing.replay_history`` replays it)."""
        engine = self._engines.require()

        async def read() -> dict[str, Any]:
            record = await self._record()
            return history.export(record, await engine.load_steps(record.run_id))

        return await self._ride("export history of workflow", read)

    async def check_replay(self) -> replaying.ReplayReport:
        """Whether the code registered now would replay this execution's history (nothing
        runs or is written; see ``sagaway replay``)."""
        engine = self._engines.require()
        record = await self._record()
        return await replaying.replay(engine, record, await engine.load_steps(record.run_id))

    async def get_event(self, key: str, *, timeout: float | None = None) -> Any:
        """The value of the event ``key`` (``sw.set_event``), waiting until the workflow sets
        it. Raises ``TimeoutError`` past ``timeout`` seconds, ``sw.EventNotSet`` if the
        workflow ends without setting it."""
        run = await self._ride("workflow", self._record)
        return await streams.get_event(self._engines.require(), run, key, timeout)

    async def read_stream(
        self, stream: str, *, offset: int = 0, follow: bool = True, timeout: float | None = None
    ) -> AsyncIterator[streams.OutputItem]:
        """The items of ``stream`` (``sw.write_stream``) from ``offset`` on; with ``follow``
        (default) it waits for more until the workflow has ended and all are read. Resume
        after an item with ``offset=item.offset + 1``: nothing is missed or repeated."""
        run = await self._ride("workflow", self._record)
        engine = self._engines.require()
        items = streams.read_stream(engine, run, stream, offset, follow=follow, timeout=timeout)
        async for item in items:
            yield item

    async def outputs(
        self, *, after: int = 0, follow: bool = True, timeout: float | None = None
    ) -> AsyncIterator[streams.OutputItem]:
        """Everything the workflow publishes (events and items of every stream) with a
        ``seq`` greater than ``after``, in order; ``follow`` as in ``read_stream``."""
        run = await self._ride("workflow", self._record)
        engine = self._engines.require()
        async for item in streams.outputs(engine, run, after, follow=follow, timeout=timeout):
            yield item

    async def search_attributes(self) -> dict[str, search.AttributeValue]:
        """The search attributes the workflow set (``sw.set_search_attributes``)."""
        engine, run = self._engines.require(), await self._ride("workflow", self._record)
        found = await engine.store.list_search_attributes(run.run_id)
        return {a.name: search.from_attribute(a) for a in found}

    async def result(self, timeout: float | None = None) -> R:
        """Wait until the workflow ends; its result, or its completable error raised.

        SUSPENDED and WAITING are not ends: this keeps waiting through recovery, and through
        an outage of the database or the Engine Server shorter than the Manager's
        ``unavailable_timeout``. ``timeout`` bounds the whole wait, outages included.

        Raises:
            CompletableError: (or the ErrorMarshaler's type) when the workflow FAILED.
            WorkflowCancelled: when it was cancelled or terminated.
            TimeoutError: when ``timeout`` seconds passed first.
            EngineUnavailable: when an outage lasted ``unavailable_timeout`` seconds.
        """
        execution = current_execution()
        if execution is not None:
            # Inside a workflow: a durable wait for a child (unloads the parent while it waits).
            if self._child_def is None:
                raise errors.SagawayError(
                    "inside a workflow, wait for a child with the handle its execute() returned "
                    "or with manager.workflow(...).execute_get()"
                )
            call_id, _ = context.next_call_id()
            result: R = await execution.call_child_result(self._child_def, self.key, call_id)
            return result
        engine = self._engines.require()
        # One deadline from this call, one outage policy: end_wait.
        record = await end_wait.wait_for_end(
            engine, self.key, run_id=self.run_id, timeout=timeout, client=True
        )
        if record.status is WorkflowStatus.COMPLETED:
            try:
                defn = engine.registry.workflow(record.name)
            except errors.NotRegistered:
                # A client that does not register the workflow gets plain JSON back.
                raw = (
                    None
                    if record.result is None
                    else serialization.load_json(record.result, "result")
                )
                return raw  # type: ignore[return-value]  # untyped client: plain JSON
            decoded: R = defn.codec.decode_result(record.result)
            return decoded
        if record.status is WorkflowStatus.FAILED:
            assert record.error is not None
            raise serialization.error_from_record(record.error, engine.marshaler)
        reason = (serialization.error_summary(record.error) or {}).get("message", "")
        raise errors.WorkflowCancelled(self.key, record.status.value, str(reason))

    async def update(
        self,
        name: str,
        payload: Any = None,
        **options: Unpack[UpdateOptions],
    ) -> UpdateResult:
        """Send update ``name`` to this workflow and wait for its answer: the handler's result
        (``UpdateResult``), or ``UpdateRejected`` with the validator's reason. ``options``
        (``update_id``, ``timeout``, ``result_type``): see ``Update.send`` (docs/updates.md)."""
        return await updates.Update(self._engines, name).send(self.key, payload, **options)

    async def pause(self, reason: str = "paused by request") -> bool:
        """Pause this workflow: it stops before its next durable call, gives its lease and
        worker slot up, and no worker takes it until ``resume()``. False if it has ended."""
        return await pausing.pause_workflow(self._engines.require(), self.key, True, reason)

    async def resume(self, reason: str = "resumed by request") -> bool:
        """Let a paused workflow run on from where it stopped. False if it was not paused."""
        return await pausing.pause_workflow(self._engines.require(), self.key, False, reason)

    async def cancel(self, reason: str = "cancelled by request") -> bool:
        """Ask the workflow to cancel; False if it had already ended.

        Cancellation is cooperative: the workflow sees ``sagaway.Cancelled`` at its next durable
        call or wait (an activity already running finishes first), its ``Saga`` compensates the
        steps done, in reverse order, and it ends CANCELLED. A cancel that comes while it
        compensates does not interrupt the compensations. A workflow waiting on a child asks
        the child to cancel too. ``result()`` then raises ``WorkflowCancelled``. To end a
        workflow at once without compensating, use ``manager.terminate(key)``.

        The request rides through an outage (``EngineUnavailable`` once it has lasted the
        Manager's ``unavailable_timeout``): it is recorded once, the first reason kept.
        """
        if not isinstance(reason, str):
            raise TypeError(f"reason must be a string, not {type(reason).__name__}")
        engine = self._engines.require()
        note = audit.note("cancel", reason)  # once: a call tried again writes one entry
        return await self._ride(
            "cancel workflow", lambda: engine.request_cancel(self.key, reason, audit_note=note)
        )


class WorkflowCall(PendingCall[R]):
    """``manager.workflow(fn, *args, **kwargs)``: a workflow start, made with an execute method."""

    async def execute(
        self,
        *,
        idempotency_key: str | None = None,
        on_conflict: OnConflict = OnConflict.ATTACH,
        deadline: float | None = None,
        concurrency_key: str | None = None,
        timeout: float | None = None,
        reason: str | None = None,
        **placing: Unpack[StartPlacing],
    ) -> WorkflowHandle[R]:
        """Start the workflow (or find the execution its key names) and return a handle.

        Inside a workflow this starts a child workflow exactly once, fire-and-forget; its key
        defaults to ``<parent key>/<call id>``.

        ``deadline``: seconds from the workflow's start. Past it the workflow is cancelled as
        by ``handle.cancel()`` (it compensates and ends CANCELLED). It is recorded with the
        workflow, so it holds across restarts; attaching to an existing execution does not
        change its deadline. (``timeout=`` is its deprecated old name: a ``timeout`` bounds a
        wait, as in ``result(timeout=)``.)

        ``concurrency_key``: at most ``max_per_key`` (see ``register_workflow``) executions
        started with this key run at once, in the whole cluster; the others wait PENDING,
        holding no lease, until one ends (docs/limits.md). Not for child workflows.

        ``reason``: why (an operator's start): a start that creates the execution is then
        recorded in the audit trail, as every start outside a workflow is under
        ``Manager(audit="all")``. Not for child workflows.

        ``placing`` (``StartPlacing``: ``ordering_key``, ``debounce_key``, ``debounce``,
        ``debounce_max_wait``, ``priority``, ``fairness_key``, ``fairness_weight``):

        ``ordering_key``: the executions started with this key run one at a time, in the
        order started, cluster-wide; each waits PENDING until those before it ended.

        ``debounce_key`` with ``debounce`` (seconds): start-or-postpone. The run starts once no
        start of this workflow and key came for ``debounce`` seconds (at most
        ``debounce_max_wait`` after the burst's first start), with the last start's arguments;
        every start of the burst gets a handle to it (docs/limits.md). Neither option is for
        child workflows; debounce takes ``on_conflict=ATTACH`` only.

        ``priority`` 1 (lowest) .. 5 (highest), default 3; ``fairness_key`` (a tenant) and its
        ``fairness_weight`` (default 1): the order of waiting starts, higher first, tenants by
        weight (docs/limits.md). Without ``priority`` a start takes its workflow's registered
        default (``register_workflow(priority=)``), else a child its parent's level, else 3.
        """
        deadline = _renamed.deadline("execute()", timeout, deadline)
        _check_start(on_conflict, deadline)
        keyed, asked = split_placing(placing, "execute()")
        if (execution := current_execution()) is not None:
            _top_level_only(concurrency_key, reason, keyed)
            return await self._start_child(execution, idempotency_key, deadline, asked)
        defn = self._engines.require().registry.workflow(self._fn)
        registered = flow.registered(flow.PLAIN, defn.priority)  # when it gives no priority
        start_flow = flow.of_start(*asked, inherited=registered)
        start = ClientStart(idempotency_key, on_conflict, deadline, reason, keyed, start_flow)
        return await self._start(defn, start, concurrency_key)

    async def _start_child(
        self,
        execution: Execution,
        key: str | None,
        deadline: float | None,
        asked: Asked,
    ) -> WorkflowHandle[R]:
        """A child's start, once, from the running ``execution`` (its parent): with its
        parent's priority and fairness unless ``asked`` gives its own."""
        engine = execution.engine
        defn = engine.registry.workflow(self._fn)
        args_json = defn.codec.encode_args(self._args, self._kwargs, engine.payload_limit)
        parent = execution.record
        inherited = flow.of_record(parent.priority, parent.fairness_key, parent.fairness_weight)
        inherited = flow.registered(inherited, defn.priority)
        child_flow = flow.of_start(*asked, inherited=inherited)
        call_id, _ = context.next_call_id()
        child_key = await execution.call_child(defn, args_json, key, call_id, deadline, child_flow)
        return WorkflowHandle(self._engines, child_key, child_of=defn)

    async def _start(
        self, defn: WorkflowDef, start: ClientStart, concurrency_key: str | None = None
    ) -> WorkflowHandle[R]:
        """A start outside a workflow, of this call's function (registered as ``defn``) and
        arguments."""
        engine = self._engines.require()
        args_json = defn.codec.encode_args(self._args, self._kwargs, engine.payload_limit)
        return await start_outside(self._engines, defn, args_json, start, concurrency_key)

    async def execute_get(self, **options: Unpack[WaitedStart]) -> R:
        """Start the workflow and wait for its result.

        ``options`` (``WaitedStart``): ``execute``'s (``idempotency_key``, ``on_conflict``,
        ``deadline``, ``concurrency_key``, ``priority``, ``fairness_*``, ``ordering_key``,
        ``debounce*``), and ``timeout``, which bounds this wait, from this call
        (``TimeoutError``; the workflow runs on), where ``deadline`` is the workflow's own.
        (``workflow_timeout=`` is the deprecated old name of ``deadline``.)
        """
        old = options.pop("workflow_timeout", None)
        deadline = _renamed.workflow_deadline("execute_get()", old, options.get("deadline"))
        return await self._start_and_wait("execute_get()", deadline, options)

    async def _start_and_wait(self, call: str, deadline: float | None, options: WaitedStart) -> R:
        unknown = sorted(set(options) - WAITED)
        if unknown:
            raise TypeError(f"{call} got an unexpected keyword argument {unknown[0]!r}")
        placing = {name: value for name, value in options.items() if name in PLACING}
        handle = await self.execute(
            idempotency_key=options.get("idempotency_key"),
            on_conflict=options.get("on_conflict", OnConflict.ATTACH),
            deadline=deadline,
            concurrency_key=options.get("concurrency_key"),
            **cast(StartPlacing, placing),
        )
        return await handle.result(timeout=options.get("timeout"))

    async def update_with_start(
        self,
        update: str,
        payload: Any = None,
        *,
        idempotency_key: str,
        **options: Unpack[UpdateOptions],
    ) -> UpdateResult:
        """Start the workflow under ``idempotency_key`` unless one runs there (``ATTACH``), then
        send it update ``update`` and wait for the answer (see ``WorkflowHandle.update``).
        Both steps are idempotent: a retry with the same key and ``update_id`` starts nothing
        new and applies the update once."""
        handle = await self.execute(idempotency_key=idempotency_key)
        return await handle.update(update, payload, **options)

    async def execute_wait(self, **options: Unpack[WaitedStart]) -> None:
        """Start the workflow and wait until it ends; the result is discarded (``options`` as
        ``execute_get`` takes them)."""
        old = options.pop("workflow_timeout", None)
        deadline = _renamed.workflow_deadline("execute_wait()", old, options.get("deadline"))
        await self._start_and_wait("execute_wait()", deadline, options)


class WaitedStart(StartPlacing, total=False):
    """The options of ``execute_get`` and ``execute_wait``: ``execute``'s, each with its
    default there (``on_conflict``: ``OnConflict.ATTACH``; the others None), and ``timeout``,
    a bound on the wait from the call (None: no bound); ``workflow_timeout`` is the
    deprecated old name of ``deadline``."""

    idempotency_key: str | None
    on_conflict: OnConflict
    timeout: float | None
    deadline: float | None
    concurrency_key: str | None
    workflow_timeout: float | None


WAITED = WaitedStart.__optional_keys__


def _check_start(on_conflict: OnConflict, deadline: float | None) -> None:
    if not isinstance(on_conflict, OnConflict):
        raise TypeError("on_conflict must be a sagaway.OnConflict")
    check_deadline(deadline)


def _top_level_only(concurrency_key: str | None, reason: str | None, flow: FlowOptions) -> None:
    """Refuse the options of a start inside a workflow that only a top-level start takes."""
    if concurrency_key is not None:
        raise ValueError(
            "concurrency_key is for top-level starts: a child workflow started inside "
            "a workflow cannot wait for a key its parent may hold"
        )
    if flow.ordering_key is not None or flow.debounce_key is not None or flow.debounce is not None:
        raise ValueError(
            "ordering_key and debounce are for top-level starts: a child workflow starts "
            "when its parent's call does, once (its parent may be waiting for it)"
        )
    if reason is not None:
        raise ValueError(
            "reason is for operators' starts, not a child's: the audit "
            "trail records what people do, not what workflows do"
        )


@dataclasses.dataclass(frozen=True, slots=True)
class ClientStart:
    """A start outside a workflow, its options checked (``execute()``, ``start_by_name``)."""

    key: str | None
    """None: a new random key."""
    on_conflict: OnConflict
    deadline: float | None
    reason: str | None
    keyed: FlowOptions
    flow: flow.Flow


async def start_outside(
    engines: EngineRef,
    defn: WorkflowDef,
    args_json: str,
    start: ClientStart,
    concurrency_key: str | None = None,
) -> WorkflowHandle[Any]:
    """Start ``defn`` with ``args_json`` outside a workflow (audited as ``start_note`` says);
    a handle to the execution its key names (a joined burst's, for a debounced start)."""
    engine = engines.require()
    record, _ = await engine.start(
        defn,
        args_json,
        key=start.key if start.key is not None else new_id(),
        on_conflict=start.on_conflict,
        deadline=start.deadline,
        concurrency_key=concurrency_key,
        client=True,  # rides through an outage: every attempt creates one execution
        audit_note=start_note(engine.options.audit, start.reason, start.on_conflict),
        flow=start.flow,
        keyed=start.keyed,
    )
    return WorkflowHandle(engines, record.key, record.run_id)


def start_note(mode: str, reason: str | None, on_conflict: OnConflict) -> AuditNote | None:
    """The audit entry of a start made outside a workflow: audited when the Manager audits
    every start (``audit="all"``) or the caller gave a reason; None otherwise (an
    application's everyday start writes nothing more)."""
    if reason is None and mode != "all":
        return None
    conflict = None if on_conflict is OnConflict.ATTACH else on_conflict.name
    return audit.note("start", reason, on_conflict=conflict)
