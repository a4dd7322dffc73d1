"""Manager: the SDK's entry point.

It registers workflows and activities, builds durable calls, starts workflows and watches them.
It is a front over named collaborators, each with one job: ``Registration`` (the registry and
declared schedules), ``ClientCalls`` (starts, calls, signals, listing), ``OperatorCalls``
(cancel, retry, fork, purge, ...), ``BatchCalls`` (those verbs on every workflow a filter
selects), ``ScheduleCalls`` (``sagaway.schedules``) and ``Runners``
(the Worker, Recovery Worker, Scheduler and purger of a running Manager); the Manager opens the
store and hands the parts the engine through its ``EngineRef``.
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
import warnings
from collections.abc import AsyncIterator, Callable, Collection, Coroutine, Sequence
from typing import Any, ParamSpec, TypeVar, Unpack, overload

from sagaway import codecs, errors, serialization
from sagaway._engine import retention as retention_mod
from sagaway._engine import versions
from sagaway._engine.engine import Engine, EngineRef
from sagaway._engine.opening import open_engine
from sagaway._engine.options import EngineOptions
from sagaway.clock import Clock, SystemClock
from sagaway.manager import settings
from sagaway.manager.batch_calls import BatchCalls
from sagaway.manager.client_calls import ClientCalls
from sagaway.manager.delegation import Delegated
from sagaway.manager.operator_calls import OperatorCalls
from sagaway.manager.registration import ActivityRegistration, Registration, WorkflowRegistration
from sagaway.manager.runners import Runners
from sagaway.registry import Queue, Registry
from sagaway.schedules import ScheduleCalls, Scheduler, put_declared
from sagaway.store import open_store
from sagaway.sync import SyncClient, set_default_manager
from sagaway.worker import Worker
from sagaway.workflow import ActivityCall, WorkflowCall

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


class Manager:
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
        self.retention, self.retention_interval = settings.retention(retention, retention_interval)
        """Seconds after its end that a workflow is purged in the background (None: kept)."""
        self.url = settings.url(url, token)
        self._token = token
        self.codec = settings.codec_chain(codec, payload_limit)
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
        """Task queues whose workflows this process's Worker runs (None: all; read at open)."""
        self.run_versions: frozenset[str | None] | None = versions.check_run_versions(run_versions)
        """Code versions whose executions this process's Worker runs (None: all; read at open)."""
        self.clock: Clock = clock or SystemClock()
        self.state = ManagerState.CLOSED
        self._ref = EngineRef()
        """The Engine while the Manager is open; handles, calls and signals share it."""
        self._registration = Registration(self._ref)
        self._clients = ClientCalls(self._ref)
        self._operators = OperatorCalls(self._ref)
        self._schedules = ScheduleCalls(self._ref)
        self._runners = Runners()

    def __repr__(self) -> str:
        return f"Manager({self.url!r}, state={self.state.value})"

    @property
    def _batches(self) -> BatchCalls:
        return BatchCalls(self._ref, self._operators)

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
        return self._runners.worker

    @property
    def retention_purger(self) -> retention_mod.RetentionPurger | None:
        """The background purger while the Manager runs with ``retention`` set, else None."""
        return self._runners.retention

    @property
    def scheduler(self) -> Scheduler | None:
        """This process's scheduler while the Manager runs workers (None otherwise)."""
        return self._runners.scheduler

    @property
    def registry(self) -> Registry:
        """The workflows and activities registered here (shared by a ``client_copy``)."""
        return self._registration.registry

    @registry.setter
    def registry(self, registry: Registry) -> None:
        self._registration.registry = registry

    # ------------------------------------------------------------------ registration

    @overload
    def register_activity(self, fn: F, /) -> F: ...

    @overload
    def register_activity(
        self, fn: None = None, /, **options: Unpack[ActivityRegistration]
    ) -> Callable[[F], F]: ...

    def register_activity(
        self, fn: F | None = None, /, **options: Unpack[ActivityRegistration]
    ) -> F | Callable[[F], F]:
        """Register an activity (async, or sync: run in a thread pool). Bare or with options.

        Inside a workflow, calling the returned function is a durable call; elsewhere (tests,
        other activities) it runs the function directly. ``priority`` (1..5): its calls' level
        in a saturated ``queue`` (default: the calling workflow's; docs/limits.md).
        """
        return self._registration.activity(fn, options, self.options.queues)

    @overload
    def register_workflow(self, fn: F, /) -> F: ...

    @overload
    def register_workflow(
        self, fn: None = None, /, **options: Unpack[WorkflowRegistration]
    ) -> Callable[[F], F]: ...

    def register_workflow(
        self, fn: F | None = None, /, **options: Unpack[WorkflowRegistration]
    ) -> F | Callable[[F], F]:
        """Register an ``async def`` workflow, bare or ``(name="...", task_queue="...")``.

        ``task_queue`` lets workers specialise: a Manager with ``task_queues`` set (or
        ``sagaway worker --task-queues``) runs only workflows of those task queues. (An
        activity's ``queue`` is something else: a concurrency and rate limit, ``sagaway.Queue``.)
        ``queue=`` is the old spelling of ``task_queue=``; it still works, with a warning.
        ``max_per_key``: how many of its executions started with one ``concurrency_key`` (see
        ``execute``) run at once in the whole cluster; the others wait PENDING (docs/limits.md).
        ``priority`` (1..5): its starts' level when a start gives none (docs/limits.md).
        ``schedule="*/5 * * * *"`` (with ``schedule_timezone``, ``catch_up``, ``schedule_args``,
        ``schedule_id``) starts it at each tick: see ``Manager.schedule``, docs/schedules.md.
        """
        return self._registration.workflow(fn, options)

    # ------------------------------------------------------------------ durable calls

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
        return self._clients.activity(fn, *args, **kwargs)

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
        return self._clients.workflow(fn, *args, **kwargs)

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

    # ------------------------------------------------------------------ client calls

    start_by_name = Delegated("_clients", ClientCalls.start_by_name)
    signal = Delegated("_clients", ClientCalls.signal)
    update = Delegated("_clients", ClientCalls.update)
    sleep = Delegated("_clients", ClientCalls.sleep)
    get_workflow = Delegated("_clients", ClientCalls.get_workflow)
    list_workflows = Delegated("_clients", ClientCalls.list_workflows)
    list_signals = Delegated("_clients", ClientCalls.list_signals)
    count_workflows = Delegated("_clients", ClientCalls.count_workflows)

    # ------------------------------------------------------------------ operator calls

    audit_log = Delegated("_operators", OperatorCalls.audit_log)
    check_replays = Delegated("_operators", OperatorCalls.check_replays)
    replay_history = Delegated("_operators", OperatorCalls.replay_history)
    retry = Delegated("_operators", OperatorCalls.retry)
    cancel = Delegated("_operators", OperatorCalls.cancel)
    terminate = Delegated("_operators", OperatorCalls.terminate)
    pause = Delegated("_operators", OperatorCalls.pause)
    resume = Delegated("_operators", OperatorCalls.resume)
    pause_activity = Delegated("_operators", OperatorCalls.pause_activity)
    resume_activity = Delegated("_operators", OperatorCalls.resume_activity)
    pause_queue = Delegated("_operators", OperatorCalls.pause_queue)
    resume_queue = Delegated("_operators", OperatorCalls.resume_queue)
    paused_calls = Delegated("_operators", OperatorCalls.paused_calls)
    fork = Delegated("_operators", OperatorCalls.fork)
    plan_fork = Delegated("_operators", OperatorCalls.plan_fork)
    purge = Delegated("_operators", OperatorCalls.purge)

    # ------------------------------------------------------------------ batch operations

    batch = Delegated("_batches", BatchCalls.batch)
    batch_cancel = Delegated("_batches", BatchCalls.batch_cancel)
    batch_terminate = Delegated("_batches", BatchCalls.batch_terminate)
    batch_retry = Delegated("_batches", BatchCalls.batch_retry)
    batch_signal = Delegated("_batches", BatchCalls.batch_signal)

    # ------------------------------------------------------------------ schedule calls

    schedule = Delegated("_schedules", ScheduleCalls.schedule)
    list_schedules = Delegated("_schedules", ScheduleCalls.list_schedules)
    pause_schedule = Delegated("_schedules", ScheduleCalls.pause_schedule)
    resume_schedule = Delegated("_schedules", ScheduleCalls.resume_schedule)
    trigger_schedule = Delegated("_schedules", ScheduleCalls.trigger_schedule)
    delete_schedule = Delegated("_schedules", ScheduleCalls.delete_schedule)

    # ------------------------------------------------------------------ lifecycle

    def _require_engine(self) -> Engine:
        return self._ref.require()

    async def _open(self, run_workers: bool, create: bool = True) -> None:
        if self.state is not ManagerState.CLOSED:
            raise errors.ManagerStateError(f"the Manager is already open ({self.state.value})")
        engine, self._runners.clock_task = await open_engine(
            open_store(self.url, create=create, token=self._token),
            codec=self.codec,
            options=self.options,
            clock=self.clock,
            registry=self.registry,
            runs_workflows=run_workers,
        )
        self._ref.engine = engine
        if not run_workers:
            self.state = ManagerState.CONNECTED
            return
        try:
            await put_declared(engine, self._registration.declared)
        except BaseException:
            await self.close()
            raise
        self._runners.start(
            engine,
            concurrency=self.concurrency,
            task_queues=self.task_queues,
            run_versions=self.run_versions,
            retention=self.retention,
            retention_interval=self.retention_interval,
        )
        self.state = ManagerState.RUNNING

    async def close(self, drain_timeout: float = 0.0, force: asyncio.Event | None = None) -> None:
        """Stop workers (running executions get ``drain_timeout`` s, or until ``force`` is set,
        then are released; one already writing its end finishes that write first)."""
        engine = self._ref.engine
        if engine is None:
            return
        try:
            await self._runners.stop(drain_timeout, force)
        finally:
            await engine.close()
            self._ref.engine = None
            self.state = ManagerState.CLOSED

    async def __aenter__(self) -> Manager:
        await self._open(run_workers=True)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
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
