"""Manager: the SDK's entry point.

It registers workflows and activities, builds durable calls, starts workflows and watches them.
``async with manager:`` opens the store and runs this process's Worker and Recovery Worker;
``async with manager.connect():`` opens the store only, for processes that start and watch
workflows while ``sagaway worker`` processes run them.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import enum
import logging
import math
import warnings
from collections.abc import AsyncIterator, Callable, Collection, Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any, ParamSpec, TypeVar, overload

from sagaway import _renamed, codecs, errors, listing, serialization
from sagaway._engine import context, history, purging, replaying, versions
from sagaway._engine import retention as retention_mod
from sagaway._engine.audit import AuditEntry
from sagaway._engine.engine import Engine, EngineRef
from sagaway._engine.executor import current_execution
from sagaway._engine.forking import ForkPlan
from sagaway._engine.opening import open_engine
from sagaway._engine.options import EngineOptions
from sagaway._engine.replaying import ReplayReport
from sagaway.clock import Clock, SystemClock
from sagaway.recovery import RecoveryWorker
from sagaway.registry import Queue, Registry, check_queue, task_queue_of
from sagaway.retry import RetryPolicy
from sagaway.schedules import ScheduleMethods, declare
from sagaway.signals import Signal
from sagaway.states import OnConflict, WorkflowStatus
from sagaway.store import open_store, resolve_url
from sagaway.store.records import SignalRecord
from sagaway.sync import SyncClient, set_default_manager
from sagaway.worker import Worker
from sagaway.workflow import (
    ActivityCall,
    WorkflowCall,
    WorkflowDescription,
    WorkflowHandle,
    activity_wrapper,
    start_by_name,
)

logger = logging.getLogger(__name__)

_RENAMED_QUEUES = "Manager.workflow_queues is now Manager.task_queues"

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


class ManagerState(enum.Enum):
    """Lifecycle of a Manager."""

    CLOSED = "closed"
    """Not open (new, or closed again); registration is allowed."""
    CONNECTED = "connected"
    """Store open, no workers (``manager.connect()``)."""
    RUNNING = "running"
    """Store open, Worker and Recovery Worker running (``async with manager``)."""


class Manager(ScheduleMethods):
    """Registers workflows and activities and runs them durably.

    Args:
        url: ``sqlite:///path.db`` (default: ``$SAGAWAY_DATABASE_URL`` or ``./sagaway.db``),
            ``postgresql://user@host:5432/db``, or an Engine Server (``sagaway server``) at
            ``grpc://host:port`` (``grpcs://`` for TLS; see docs/engine-server.md).
        token: the Engine Server's bearer token (default: ``$SAGAWAY_TOKEN``); only for
            ``grpc://`` and ``grpcs://`` URLs.
        error_marshaler: lets domain error types cross the database (default: handles
            ``CompletableError`` subclasses).
        queues: limits of activity queues, by queue name: per process, or for all processes
            together with ``Queue(scope="cluster")`` (docs/limits.md).
        recovery_interval: seconds; base backoff before a SUSPENDED workflow is retried.
        lease_timeout: seconds without a heartbeat after which another process takes a
            workflow over.
        deadline_grace: seconds an activity may run past its workflow's deadline before it
            is cancelled (default 5; docs/cancellation.md).
        poll_interval: seconds between scans for work started by other processes, and the
            longest wait between checks of a workflow running in another process.
        concurrency: workflow executions working at once in this process (running code or an
            activity); one that only waits in the worker (a child's end, a signal, a short
            timer) holds no slot, so waiting parents cannot starve their children.
        activity_threads: threads for synchronous activities.
        payload_limit: bytes of JSON allowed for arguments or a result.
        clock: time source (``sagaway.testing.FakeClock`` in tests).
        retention: when set (a ``timedelta`` or seconds), ``async with manager`` also purges,
            in the background, workflows that ended longer ago than this (see ``purge``).
        retention_interval: seconds (or a ``timedelta``) between those background purges; the
            first comes a minute after the Manager opens (sooner if the interval is shorter).
        version: the version of the application code, such as ``"2026.12.1"`` (default:
            ``$SAGAWAY_CODE_VERSION``, else None: unversioned). Every execution this process
            creates (a start, a child, a fork) records it. At most 100 characters, no control
            characters or commas.
        run_versions: the code versions whose executions this process's Worker runs (None,
            the default: every version; ``None`` in the set: unversioned executions). For
            blue/green deploys: ``Manager(version="v2", run_versions={"v2"})`` runs only what
            v2 processes started while the v1 workers drain the rest (see docs/operating.md).
        codec: a codec or a list of codecs (``sagaway.codecs``: Compress, Encrypt, Offload),
            applied in order to every stored payload (inputs, results, errors, signals) and
            undone in reverse on read; see docs/codecs.md.
        unavailable_timeout: seconds a client call (start, signal with a ``dedupe_id``, cancel,
            result, status) rides an outage out before ``EngineUnavailable`` (docs/operating.md).
        audit: ``"operator"`` records the operator verbs in the audit trail (cancel, terminate,
            retry, fork, purge, schedule changes); ``"all"`` also every start and signal made
            outside a workflow, as the command line and the console do (docs/security.md).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        error_marshaler: serialization.ErrorMarshaler | None = None,
        queues: dict[str, Queue] | None = None,
        recovery_interval: float = 10.0,
        lease_timeout: float = 30.0,
        deadline_grace: float = 5.0,
        poll_interval: float = 1.0,
        concurrency: int = 100,
        activity_threads: int = 32,
        payload_limit: int = serialization.DEFAULT_PAYLOAD_LIMIT,
        clock: Clock | None = None,
        retention: datetime.timedelta | float | None = None,
        retention_interval: datetime.timedelta | float = retention_mod.DEFAULT_INTERVAL,
        version: str | None = None,
        run_versions: Collection[str | None] | None = None,
        codec: codecs.Codec | Sequence[codecs.Codec] | codecs.Chain | None = None,
        unavailable_timeout: float = 30.0,
        audit: str = "operator",
    ) -> None:
        if concurrency < 1 or activity_threads < 1:
            raise ValueError("concurrency and activity_threads must be >= 1")
        self.retention = (
            None if retention is None else retention_mod.as_seconds(retention, "retention")
        )
        """Seconds after its end that a workflow is purged in the background (None: kept)."""
        self.retention_interval = retention_mod.as_seconds(retention_interval, "retention_interval")
        self.url = resolve_url(url)
        if token is not None and not self.url.lower().startswith("grpc"):
            raise ValueError("token= is for an Engine Server URL (grpc://host:port)")
        self._token = token
        self.codec = (
            codec
            if codec is None or isinstance(codec, codecs.Chain)
            else codecs.Chain(codec, limit=payload_limit)
        )
        """Applied to every stored payload (None: payloads stored as plain JSON)."""
        self.options = EngineOptions(
            recovery_interval=recovery_interval,
            lease_timeout=lease_timeout,
            poll_interval=poll_interval,
            activity_threads=activity_threads,
            payload_limit=payload_limit,
            marshaler=error_marshaler or serialization.DefaultErrorMarshaler(),
            queues=dict(queues or {}),
            code_version=versions.default_code_version() if version is None else version,
            unavailable_timeout=unavailable_timeout,
            deadline_grace=deadline_grace,
            audit=audit,
        )
        """The engine's settings, checked here (read-only)."""
        self.concurrency = concurrency
        """Workflow executions run at once by this process (read when the Manager opens)."""
        self.task_queues: frozenset[str] | None = None
        """Task queues whose workflows this process's Worker runs (None: all; read when the
        Manager opens)."""
        self.run_versions: frozenset[str | None] | None = versions.check_run_versions(run_versions)
        """Code versions whose executions this process's Worker runs (None: all; read when
        the Manager opens)."""
        self.clock: Clock = clock or SystemClock()
        self.registry = Registry()
        self.state = ManagerState.CLOSED
        self._ref = EngineRef()
        """The Engine while the Manager is open; handles, calls and signals share it."""
        self._worker: Worker | None = None
        self._recovery: RecoveryWorker | None = None
        self._retention: retention_mod.RetentionPurger | None = None
        self._clock_task: asyncio.Task[None] | None = None
        self._scheduler = None
        self._declared = []

    def __repr__(self) -> str:
        return f"Manager({self.url!r}, state={self.state.value})"

    @property
    def workflow_queues(self) -> frozenset[str] | None:
        """The old name of ``task_queues`` (deprecated)."""
        warnings.warn(_RENAMED_QUEUES, DeprecationWarning, stacklevel=2)
        return self.task_queues

    @workflow_queues.setter
    def workflow_queues(self, value: frozenset[str] | None) -> None:
        warnings.warn(_RENAMED_QUEUES, DeprecationWarning, stacklevel=2)
        self.task_queues = value

    @property
    def version(self) -> str | None:
        """The version of the application code recorded on the executions created here."""
        return self.options.code_version

    @property
    def worker(self) -> Worker | None:
        """This process's Worker while the Manager runs (``async with manager``), else None:
        its ``executions()`` and ``free_slots`` show what it runs and what it can take."""
        return self._worker

    @property
    def retention_purger(self) -> retention_mod.RetentionPurger | None:
        """The background purger while the Manager runs with ``retention`` set, else None."""
        return self._retention

    # ------------------------------------------------------------------ registration

    @overload
    def register_activity(self, fn: F, /) -> F: ...

    @overload
    def register_activity(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        queue: str | None = None,
    ) -> Callable[[F], F]: ...

    def register_activity(
        self,
        fn: F | None = None,
        /,
        *,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        queue: str | None = None,
    ) -> F | Callable[[F], F]:
        """Register an activity (async, or sync: run in a thread pool). Bare or with options.

        Inside a workflow, calling the returned function is a durable call; elsewhere (tests,
        other activities) it runs the function directly.
        """
        check_queue(queue, self.options.queues)

        def decorate(func: F) -> F:
            defn = self.registry.register_activity(
                func, name=name, retry_policy=retry, timeout=timeout, queue=queue
            )
            wrapper = activity_wrapper(self._ref, defn)
            self.registry.add_alias(defn, wrapper)
            return wrapper  # type: ignore[return-value]

        return decorate(fn) if fn is not None else decorate

    @overload
    def register_workflow(self, fn: F, /) -> F: ...

    @overload
    def register_workflow(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        task_queue: str = "default",
        queue: str | None = None,
        max_per_key: int = 1,
        schedule: str | None = None,
        schedule_timezone: str = "UTC",
        catch_up: str = "one",
        schedule_args: Sequence[Any] | Mapping[str, Any] | None = None,
        schedule_id: str | None = None,
    ) -> Callable[[F], F]: ...

    def register_workflow(
        self,
        fn: F | None = None,
        /,
        *,
        name: str | None = None,
        task_queue: str = "default",
        queue: str | None = None,
        max_per_key: int = 1,
        schedule: str | None = None,
        schedule_timezone: str = "UTC",
        catch_up: str = "one",
        schedule_args: Sequence[Any] | Mapping[str, Any] | None = None,
        schedule_id: str | None = None,
    ) -> F | Callable[[F], F]:
        """Register an ``async def`` workflow, bare or ``(name="...", task_queue="...")``.

        ``task_queue`` lets workers specialise: a Manager with ``task_queues`` set (or
        ``sagaway worker --task-queues``) runs only workflows of those task queues. (An
        activity's ``queue`` is something else: a concurrency and rate limit, ``sagaway.Queue``.)
        ``queue=`` is the old spelling of ``task_queue=``; it still works, with a warning.
        ``max_per_key``: how many of its executions started with one ``concurrency_key`` (see
        ``execute``) run at once in the whole cluster; the others wait PENDING (docs/limits.md).
        ``schedule="*/5 * * * *"`` (with ``schedule_timezone``, ``catch_up``, ``schedule_args``,
        ``schedule_id``) starts it at each tick: see ``Manager.schedule``, docs/schedules.md.
        """
        task_queue = task_queue_of(task_queue, queue)

        def decorate(func: F) -> F:
            spec = declare(
                func, name, schedule, schedule_timezone, catch_up, schedule_args, schedule_id
            )
            self.registry.register_workflow(
                func, name=name, task_queue=task_queue, max_per_key=max_per_key
            )
            if spec is not None:
                self._declared.append(spec)
            return func

        return decorate(fn) if fn is not None else decorate

    # ------------------------------------------------------------------ calls

    @overload
    def activity(
        self, fn: Callable[P, Coroutine[Any, Any, R]], /, *args: P.args, **kwargs: P.kwargs
    ) -> ActivityCall[R]: ...

    @overload
    def activity(
        self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs
    ) -> ActivityCall[R]: ...

    @overload
    def activity(self, fn: str, /, *args: Any, **kwargs: Any) -> ActivityCall[Any]: ...

    def activity(
        self, fn: Callable[..., Any] | str, /, *args: Any, **kwargs: Any
    ) -> ActivityCall[Any]:
        """A durable call of a registered activity; run it with ``execute_get``/``execute_wait``."""
        return ActivityCall(self._ref, fn, args, kwargs)

    @overload
    def workflow(
        self, fn: Callable[P, Coroutine[Any, Any, R]], /, *args: P.args, **kwargs: P.kwargs
    ) -> WorkflowCall[R]: ...

    @overload
    def workflow(self, fn: str, /, *args: Any, **kwargs: Any) -> WorkflowCall[Any]: ...

    def workflow(
        self, fn: Callable[..., Any] | str, /, *args: Any, **kwargs: Any
    ) -> WorkflowCall[Any]:
        """A start of a registered workflow; run it with ``execute``/``execute_get``."""
        return WorkflowCall(self._ref, fn, args, kwargs)

    async def start_by_name(
        self,
        name: str,
        kwargs: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        task_queue: str = "default",
        on_conflict: OnConflict = OnConflict.ATTACH,
        deadline: float | None = None,
        timeout: float | None = None,
        reason: str | None = None,
    ) -> WorkflowHandle[Any]:
        """Start a workflow known here by name only (a worker registered it), its arguments by
        parameter name as JSON values; ``result()`` returns plain JSON. A name registered here
        is started as ``workflow(name, **kwargs).execute(deadline=...)`` would (``timeout=``:
        the deprecated old name of ``deadline``). ``reason``: an operator's start, recorded in
        the audit trail with it."""
        return await start_by_name(
            self._ref,
            name,
            dict(kwargs or {}),
            key=idempotency_key,
            task_queue=task_queue,
            on_conflict=on_conflict,
            deadline=_renamed.deadline("start_by_name()", timeout, deadline),
            reason=reason,
        )

    def sync(self, *, call_timeout: float | None = 60.0) -> SyncClient:
        """A blocking client for synchronous code on this Manager's database, with its registry
        and options: see ``SyncClient`` and docs/sync-client.md (this Manager need not be open)."""
        return SyncClient(manager=self, call_timeout=call_timeout)

    def client_copy(self) -> Manager:
        """A new, closed Manager on the same database, with this one's registry, options and
        clock (for another event loop; ``SyncClient`` opens one in client mode)."""
        copy = Manager(self.url, token=self._token, clock=self.clock)
        copy.options = self.options
        copy.registry = self.registry
        copy.codec = self.codec  # a sync client must seal what it stores, too
        return copy

    def signal(self, name: str) -> Signal:
        """A named signal: ``send(key, payload)`` from anywhere, ``receive(Type)`` in a workflow."""
        return Signal(self._ref, name)

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

    async def list_workflows(
        self,
        *,
        status: str | Collection[str] | None = None,
        limit: int = 100,
        name: str | None = None,
        key_prefix: str | None = None,
        since: float | None = None,
        until: float | None = None,
        after: str | None = None,
        code_versions: Collection[str | None] | None = None,
    ) -> list[WorkflowDescription]:
        """Current workflows, newest first (steps not included).

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

        Raises ValueError when ``after`` is not a cursor, or a status is unknown.
        """
        return await listing.list_workflows(
            self._ref.require(),
            status=status,
            limit=limit,
            name=name,
            key_prefix=key_prefix,
            since=since,
            until=until,
            after=after,
            code_versions=code_versions,
        )

    async def audit_log(
        self,
        *,
        key: str | None = None,
        run_id: str | None = None,
        actor: str | None = None,
        action: str | Collection[str] | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 100,
        before: int | None = None,
    ) -> list[AuditEntry]:
        """The audit trail of operator actions, newest first, purged workflows' included:
        ``key`` (a workflow key or schedule id), ``run_id``, ``actor`` (the actor or who it
        acted for), ``action`` (one or several: ``cancel``, ``terminate``, ...), ``since`` /
        ``until`` (epoch seconds) narrow it; ``before``: the ``seq`` of the last entry of the
        previous page. See docs/security.md, "Audit trail"."""
        return await listing.audit_log(
            self._ref.require(),
            key=key,
            run_id=run_id,
            actor=actor,
            action=action,
            since=since,
            until=until,
            limit=limit,
            before=before,
        )

    async def list_signals(self, key: str) -> list[SignalRecord]:
        """Signals sent to the current workflow under ``key``, delivered or not, in order."""
        return await self._ref.require().list_signals(key)

    async def count_workflows(self) -> dict[WorkflowStatus, int]:
        """How many current workflows are in each status."""
        return await self._ref.require().count_by_status()

    async def check_replays(
        self, *, ended: bool = False, since: float | None = None
    ) -> list[ReplayReport]:
        """Replay the history of every live execution (``ended``: of the ended ones too) created
        at or after ``since`` against the code registered in this Manager, running nothing and
        writing nothing; one report per execution, ``diverged`` where the code would not replay
        it. Run it before deploying new workflow code (``sagaway replay``)."""
        statuses = frozenset(WorkflowStatus) if ended else replaying.LIVE
        return await replaying.replay_listed(self._ref.require(), statuses=statuses, since=since)

    async def replay_history(self, document: object) -> ReplayReport:
        """Replay an exported history (``handle.export_history()``, ``sagaway show KEY
        --export``) against the code registered in this Manager (open; nothing is written)."""
        record, steps = history.load(document)
        return await replaying.replay(self._ref.require(), record, steps)

    async def retry(self, key: str, *, reason: str | None = None) -> bool:
        """Make a SUSPENDED workflow due now; False if it is not suspended. Like cancel,
        terminate, fork and purge, recorded in the audit trail (who, when, ``reason``)."""
        return await self._ref.require().retry_now(key, reason)

    async def cancel(self, key: str, reason: str = "cancelled by request") -> bool:
        """Ask the workflow under ``key`` to cancel; False if it had already ended.
        Cooperative, with compensation, riding through outages: see ``WorkflowHandle.cancel``."""
        return await self.get_workflow(key).cancel(reason)

    async def terminate(self, key: str, reason: str = "terminated by operator") -> bool:
        """End a live workflow as TERMINATED at once, without compensating; False if it had
        already ended. Reservations its steps made stay made: use ``cancel`` to undo them."""
        return await self._ref.require().end(key, WorkflowStatus.TERMINATED, reason)

    async def fork(
        self,
        key: str,
        *,
        from_step: int,
        new_key: str,
        force: bool = False,
        reason: str | None = None,
    ) -> WorkflowHandle[Any]:
        """Run the ended workflow ``key`` again under ``new_key``, from its step ``from_step``
        (``manager.fork("order-7", from_step=3, new_key="order-7-fix")`` once a bug in step 3
        is fixed). Like DBOS's fork and Temporal's reset: the new execution has the same
        workflow, arguments and task queue, and no parent. It reuses the recorded outcomes of
        the top-level steps ``1 .. from_step - 1`` (the ``#`` column of ``sagaway show``) and
        of the branch steps (``asyncio.gather``, tasks) that ended before step ``from_step``
        started; the rest runs again, under new idempotency keys. ``from_step`` one past the
        last step keeps every step (it runs on from where the source stopped). It is PENDING
        when this returns, and a Worker serving its task queue runs it; wait with ``result()``.

        Raises:
            WorkflowNotFound: no workflow has ``key``.
            WorkflowNotEnded: it has not ended (PENDING, RUNNING, WAITING, or SUSPENDED:
                terminate it first), or a kept step started a child that is still running.
            ForkRefused: the source ran compensations from ``from_step`` on, which may have
                undone the steps the fork keeps; ``force=True`` forks anyway (docs/fork.md).
            WorkflowAlreadyExists: ``new_key`` is taken.
            ValueError: ``from_step`` is out of range, or ``new_key`` is not a valid key.
        """
        engine = self._ref.require()
        record, _ = await engine.fork(
            key, from_step=from_step, new_key=new_key, force=force, reason=reason
        )
        return WorkflowHandle(self._ref, new_key, record.run_id)

    async def plan_fork(self, key: str, *, from_step: int, force: bool = False) -> ForkPlan:
        """What ``fork(key, from_step=..., force=...)`` would keep and run again; writes
        nothing. Raises what ``fork`` raises about the source and ``from_step``."""
        return await self._ref.require().plan_fork(key, from_step=from_step, force=force)

    async def purge(
        self,
        older_than: datetime.timedelta | float,
        *,
        statuses: Collection[WorkflowStatus | str] | None = None,
        batch_size: int = retention_mod.DEFAULT_BATCH,
        dry_run: bool = False,
        on_batch: Callable[[int], None] | None = None,
        reason: str | None = None,
    ) -> int:
        """Delete workflows that ended more than ``older_than`` (a ``timedelta`` or seconds)
        ago, with their steps and signals; returns how many (``dry_run``: how many would be,
        deleting nothing).

        Only ended workflows (COMPLETED, FAILED, CANCELLED, TERMINATED; ``statuses`` narrows
        that; a live status is a ``ValueError``), none a live workflow may still read. It deletes in
        batches of ``batch_size``, each one short transaction, calling ``on_batch(n)`` after
        each, so workers running at the same time are not held up. A purged key can be started
        again: it names a new execution.
        """
        return await self._ref.require().purge(
            purging.as_seconds(older_than, "older_than"),
            statuses=purging.checked_statuses(statuses, batch_size),
            batch_size=batch_size,
            dry_run=dry_run,
            on_batch=on_batch,
            reason=reason,
        )

    # ------------------------------------------------------------------ lifecycle

    def _require_engine(self) -> Engine:
        return self._ref.require()

    async def _open(self, run_workers: bool, create: bool = True) -> None:
        if self.state is not ManagerState.CLOSED:
            raise errors.ManagerStateError(f"the Manager is already open ({self.state.value})")
        engine, self._clock_task = await open_engine(
            open_store(self.url, create=create, token=self._token),
            codec=self.codec,
            options=self.options,
            clock=self.clock,
            registry=self.registry,
            runs_workflows=run_workers,
        )
        self._ref.engine = engine
        if run_workers:
            await self._write_declared(engine)  # closes the Manager if it fails
            worker = Worker(engine, self.concurrency, self.task_queues, self.run_versions)
            recovery = RecoveryWorker(engine, worker)
            worker.start()
            recovery.start()
            self._worker, self._recovery = worker, recovery
            self._start_scheduler(engine)
            if self.retention is not None:
                self._retention = retention_mod.RetentionPurger(
                    engine, self.retention, interval=self.retention_interval
                )
                self._retention.start()
            self.state = ManagerState.RUNNING
        else:
            self.state = ManagerState.CONNECTED

    async def close(self, drain_timeout: float = 0.0, force: asyncio.Event | None = None) -> None:
        """Stop workers (running executions get ``drain_timeout`` s, or until ``force`` is set,
        then are released; one already writing its end finishes that write first)."""
        engine = self._ref.engine
        if engine is None:
            return
        if self._clock_task is not None:
            self._clock_task.cancel()
            self._clock_task = None
        try:
            if self._retention is not None:
                await self._retention.stop()
            await self._stop_scheduler()
            if self._recovery is not None:
                await self._recovery.stop()
            if self._worker is not None:
                await self._worker.stop(drain_timeout, force)
        finally:
            await engine.close()
            self._ref.engine = None
            self._worker = self._recovery = None
            self._retention = None
            self.state = ManagerState.CLOSED

    async def __aenter__(self) -> Manager:
        await self._open(run_workers=True)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @contextlib.asynccontextmanager
    async def connect(self, *, create: bool = True) -> AsyncIterator[Manager]:
        """Open the engine without Workers: start, signal and watch workflows only.

        ``create=False`` opens an existing Sagaway database only and creates nothing (no SQLite
        file or directory, no PostgreSQL schema): ``sagaway.store.DatabaseNotFound`` when there
        is none. A PostgreSQL server that cannot be reached then fails within seconds
        (``StoreUnavailable``, with the server's message) instead of waiting ``pool_timeout``.
        """
        await self._open(run_workers=False, create=create)
        try:
            yield self
        finally:
            await self.close()

    async def serve(
        self, stop: asyncio.Event, drain_timeout: float = 30.0, force: asyncio.Event | None = None
    ) -> None:
        """Run Workers until ``stop`` is set, then drain for ``drain_timeout`` s (cut short when
        ``force`` is set) and close."""
        await self._open(run_workers=True)
        try:
            await stop.wait()
        finally:
            await self.close(drain_timeout, force)


set_default_manager(Manager)
