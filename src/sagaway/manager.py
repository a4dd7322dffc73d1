"""Manager: the SDK's entry point.

It registers workflows and activities, builds durable calls, starts workflows and watches them.
``async with manager:`` opens the store and runs this process's Worker and Recovery Worker;
``async with manager.connect():`` opens the store only, for processes that start and watch
workflows while ``sagaway worker`` processes run them.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import logging
import math
from collections.abc import AsyncIterator, Callable, Coroutine
from types import TracebackType
from typing import Any, ParamSpec, TypeVar, overload

from sagaway import errors, serialization
from sagaway._engine import context
from sagaway._engine.engine import Engine
from sagaway._engine.states import WorkflowStatus
from sagaway.clock import Clock, OffsetClock, SystemClock
from sagaway.recovery import RecoveryWorker
from sagaway.registry import ActivityDef, Queue, Registry
from sagaway.retry import RetryPolicy
from sagaway.signals import Signal
from sagaway.store import Store, open_store, resolve_url
from sagaway.store.records import SignalRecord
from sagaway.worker import Worker
from sagaway.workflow import (
    ActivityCall,
    WorkflowCall,
    WorkflowDescription,
    WorkflowHandle,
    _describe,
)

logger = logging.getLogger(__name__)

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
        url: ``sqlite:///path.db`` (default: ``$SAGAWAY_DATABASE_URL`` or ``./sagaway.db``)
            or ``postgresql://user@host:5432/db``.
        error_marshaler: lets domain error types cross the database (default: handles
            ``CompletableError`` subclasses).
        queues: per-process limits of activity queues, by queue name.
        recovery_interval: seconds; base backoff before a SUSPENDED workflow is retried.
        lease_timeout: seconds without a heartbeat after which another process takes a
            workflow over.
        poll_interval: seconds between scans for work started by other processes, and the
            longest wait between checks of a workflow running in another process.
        concurrency: workflow executions working at once in this process (running code or an
            activity); one that only waits in the worker (a child's end, a signal, a short
            timer) holds no slot, so waiting parents cannot starve their children.
        activity_threads: threads for synchronous activities.
        payload_limit: bytes of JSON allowed for arguments or a result.
        clock: time source (``sagaway.testing.FakeClock`` in tests).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        error_marshaler: serialization.ErrorMarshaler | None = None,
        queues: dict[str, Queue] | None = None,
        recovery_interval: float = 10.0,
        lease_timeout: float = 30.0,
        poll_interval: float = 1.0,
        concurrency: int = 100,
        activity_threads: int = 32,
        payload_limit: int = serialization.DEFAULT_PAYLOAD_LIMIT,
        clock: Clock | None = None,
    ) -> None:
        for label, value in (
            ("recovery_interval", recovery_interval),
            ("lease_timeout", lease_timeout),
            ("poll_interval", poll_interval),
        ):
            if not value > 0:
                raise ValueError(f"{label} must be > 0 seconds, got {value!r}")
        if concurrency < 1 or activity_threads < 1:
            raise ValueError("concurrency and activity_threads must be >= 1")
        if payload_limit < 1024:
            raise ValueError("payload_limit must be at least 1024 bytes")
        if error_marshaler is not None and not isinstance(
            error_marshaler, serialization.ErrorMarshaler
        ):
            raise TypeError(
                "error_marshaler must implement marshal_completable_error(err) -> bytes | None "
                "and unmarshal_completable_error(data) -> BaseException"
            )
        self.url = resolve_url(url)
        self._marshaler = error_marshaler or serialization.DefaultErrorMarshaler()
        self._queues = dict(queues or {})
        for name, queue in self._queues.items():
            if not isinstance(queue, Queue):
                raise TypeError(f"queues[{name!r}] must be a sagaway.Queue")
        self._recovery_interval = recovery_interval
        self._lease_timeout = lease_timeout
        self._poll_interval = poll_interval
        self.concurrency = concurrency
        """Workflow executions run at once by this process (read when the Manager opens)."""
        self.workflow_queues: frozenset[str] | None = None
        """Workflow queues this process's Worker runs (None: every queue)."""
        self._activity_threads = activity_threads
        self._payload_limit = payload_limit
        self.clock: Clock = clock or SystemClock()
        self.registry = Registry()
        self.state = ManagerState.CLOSED
        self._engine: Engine | None = None
        self._worker: Worker | None = None
        self._recovery: RecoveryWorker | None = None
        self._clock_task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"Manager({self.url!r}, state={self.state.value})"

    @property
    def worker(self) -> Worker | None:
        """This process's Worker while the Manager runs (``async with manager``), else None:
        its ``executions()`` and ``free_slots`` show what it runs and what it can take."""
        return self._worker

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
        if queue is not None and queue not in self._queues:
            raise ValueError(
                f"queue {queue!r} is not configured; pass queues={{{queue!r}: sagaway.Queue(...)}} "
                "to the Manager"
            )

        def decorate(func: F) -> F:
            defn = self.registry.register_activity(
                func, name=name, retry_policy=retry, timeout=timeout, queue=queue
            )
            wrapper = self._activity_wrapper(defn)
            self.registry.add_alias(defn, wrapper)
            return wrapper  # type: ignore[return-value]

        return decorate(fn) if fn is not None else decorate

    def _activity_wrapper(self, defn: ActivityDef) -> Callable[..., Any]:
        func = defn.fn
        if defn.is_async:

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                if context.current_execution() is not None:
                    return await ActivityCall[Any](self, defn.name, args, kwargs).execute_get()
                return await func(*args, **kwargs)

            return async_wrapper

        @functools.wraps(func)
        def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
            if context.current_execution() is not None:
                return ActivityCall[Any](self, defn.name, args, kwargs).execute_get()
            return func(*args, **kwargs)

        return sync_wrapper

    @overload
    def register_workflow(self, fn: F, /) -> F: ...

    @overload
    def register_workflow(
        self, fn: None = None, /, *, name: str | None = None, queue: str = "default"
    ) -> Callable[[F], F]: ...

    def register_workflow(
        self, fn: F | None = None, /, *, name: str | None = None, queue: str = "default"
    ) -> F | Callable[[F], F]:
        """Register an ``async def`` workflow, bare or ``(name="...", queue="...")``.

        ``queue`` lets workers specialise: a Manager with ``workflow_queues`` set (or
        ``sagaway worker --queues``) runs only workflows of those queues.
        """

        def decorate(func: F) -> F:
            self.registry.register_workflow(func, name=name, queue=queue)
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
        return ActivityCall(self, fn, args, kwargs)

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
        return WorkflowCall(self, fn, args, kwargs)

    def signal(self, name: str) -> Signal:
        """A named signal: ``send(key, payload)`` from anywhere, ``receive(Type)`` in a workflow."""
        return Signal(self, name)

    async def sleep(self, seconds: float) -> None:
        """A durable timer inside a workflow: a resumed workflow sleeps only what is left."""
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"sleep seconds must be a finite number >= 0, not {seconds!r}")
        execution = context.current_execution()
        if execution is None:
            raise errors.SagawayError(
                "manager.sleep() is a durable timer: call it inside a workflow"
            )
        _, call_id, _ = context.next_call_id()
        await execution.call_sleep(float(seconds), call_id)

    def get_workflow(self, key: str) -> WorkflowHandle[Any]:
        """A handle for the workflow under ``key`` (no I/O; methods raise WorkflowNotFound)."""
        return WorkflowHandle(self, key)

    async def list_workflows(
        self, *, status: WorkflowStatus | None = None, limit: int = 100
    ) -> list[WorkflowDescription]:
        """Current workflows, newest first (steps not included)."""
        engine = self._require_engine()
        records = await engine.store.list_workflows(status=status, limit=limit)
        return [_describe(r, []) for r in records]

    async def list_signals(self, key: str) -> list[SignalRecord]:
        """Signals sent to the current workflow under ``key``, delivered or not, in order."""
        engine = self._require_engine()
        record = await engine.get(key)
        return await engine.store.list_signals(record.run_id)

    async def count_workflows(self) -> dict[WorkflowStatus, int]:
        """How many current workflows are in each status."""
        return await self._require_engine().store.count_by_status()

    async def retry(self, key: str) -> bool:
        """Make a SUSPENDED workflow due now; False if it is not suspended."""
        return await self._require_engine().retry_now(key)

    async def terminate(self, key: str, reason: str = "terminated by operator") -> bool:
        """End a live workflow as TERMINATED; False if it had already ended."""
        return await self._require_engine().end(key, WorkflowStatus.TERMINATED, reason)

    # ------------------------------------------------------------------ lifecycle

    def _require_engine(self) -> Engine:
        if self._engine is None:
            raise errors.ManagerStateError(
                "the Manager is not open: use `async with manager:` (runs workers) or "
                "`async with manager.connect():` (client only)"
            )
        return self._engine

    async def _open(self, run_workers: bool) -> None:
        if self.state is not ManagerState.CLOSED:
            raise errors.ManagerStateError(f"the Manager is already open ({self.state.value})")
        store = open_store(self.url)
        engine = Engine(
            store,
            clock=self.clock,
            registry=self.registry,
            marshaler=self._marshaler,
            payload_limit=self._payload_limit,
            lease_timeout=self._lease_timeout,
            recovery_interval=self._recovery_interval,
            poll_interval=self._poll_interval,
            queues=self._queues,
            activity_threads=self._activity_threads,
        )
        await store.open()
        await self._use_server_clock(engine)
        await store.listen(engine.on_notification)
        self._engine = engine
        if run_workers:
            worker = Worker(engine, self.concurrency, self.workflow_queues)
            recovery = RecoveryWorker(engine, worker)
            engine.worker = worker
            worker.start(recovery.wake)
            recovery.start()
            self._worker, self._recovery = worker, recovery
            self.state = ManagerState.RUNNING
        else:
            self.state = ManagerState.CONNECTED

    async def _use_server_clock(self, engine: Engine) -> None:
        """On a shared server, take every time from the server's clock (see OffsetClock)."""
        offset = await _measure_offset(engine.store, self.clock)
        if offset is None:
            return
        clock = OffsetClock(self.clock, offset)
        engine.clock = clock
        if isinstance(self.clock, SystemClock):
            # Local clocks drift and get stepped by NTP: measure again now and then.
            self._clock_task = asyncio.create_task(_refresh_offset(engine.store, clock))

    async def close(self, drain_timeout: float = 0.0, force: asyncio.Event | None = None) -> None:
        """Stop workers (running executions get ``drain_timeout`` s, or until ``force`` is set,
        then are released)."""
        engine = self._engine
        if engine is None:
            return
        if self._clock_task is not None:
            self._clock_task.cancel()
            self._clock_task = None
        try:
            if self._recovery is not None:
                await self._recovery.stop()
            if self._worker is not None:
                await self._worker.stop(drain_timeout, force)
        finally:
            engine.worker = None
            engine.close_thread_pool()
            await engine.store.close()
            self._engine = self._worker = self._recovery = None
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
    async def connect(self) -> AsyncIterator[Manager]:
        """Open the engine without Workers: start, signal and watch workflows only."""
        await self._open(run_workers=False)
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


async def _measure_offset(store: Store, local: Clock) -> float | None:
    before = local.now()
    server = await store.server_time()
    after = local.now()
    return None if server is None else server - (before + after) / 2


async def _refresh_offset(store: Store, clock: OffsetClock, every: float = 60.0) -> None:
    while True:
        await clock.local.sleep(every)
        try:
            offset = await _measure_offset(store, clock.local)
        except Exception:
            logger.warning("could not read the database clock; keeping the last offset")
            continue
        if offset is not None:
            clock.offset = offset
