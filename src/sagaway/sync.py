"""A blocking client for synchronous code: ``sagaway.SyncClient`` and ``manager.sync()``.

Django views, Flask routes and scripts have no event loop. The client runs one asyncio event
loop in a daemon thread of its own (``_loop_thread``) and opens there, at first use, a Manager
in client mode (``connect()``: no workers; ``sagaway worker`` processes run the workflows). Each
blocking method hands a coroutine to that loop (``asyncio.run_coroutine_threadsafe``) and waits
for its outcome; the exception it raises is raised in the caller's thread, of the same type as the
async API's. Many threads can share one client: the loop thread runs their calls in turn.

A client belongs to the process that created it: its thread does not survive ``fork()``, so
create it after forking (in each gunicorn worker, not in the master); use in a forked child
is refused with ``ManagerStateError``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, Unpack, overload

from sagaway import _loop_thread as loop_thread
from sagaway import _renamed, errors, sync_starts
from sagaway.batches import BatchAction, BatchOptions, BatchReport, WorkflowFilter
from sagaway.states import OnConflict
from sagaway.sync_handle import DEFAULT_CALL_TIMEOUT as DEFAULT_CALL_TIMEOUT  # re-exported
from sagaway.sync_handle import SyncWorkflowHandle as SyncWorkflowHandle  # re-exported
from sagaway.sync_starts import ClientManager as ClientManager  # re-exported

logger = logging.getLogger(__name__)

R = TypeVar("R")
T = TypeVar("T")


_default_manager: Callable[..., ClientManager] | None = None


def set_default_manager(factory: Callable[..., ClientManager]) -> None:
    """What ``SyncClient(url, token=...)`` builds its Manager with (``sagaway.Manager``, set
    by ``sagaway.manager``, which sits above this module)."""
    global _default_manager
    _default_manager = factory


class SyncClient:
    """Start, watch, signal and cancel workflows from synchronous code.

    ``SyncClient(url)`` knows workflows by name only: it starts them with keyword arguments
    (JSON values) and returns their results as plain JSON. ``manager.sync()`` (or
    ``SyncClient(manager=manager)``) shares that Manager's registry, so registered functions
    can be passed and results decode into their return types.

    Args:
        url: the database or Engine Server, as for ``Manager`` (default:
            ``$SAGAWAY_DATABASE_URL`` or ``./sagaway.db``).
        token: the Engine Server's bearer token (``grpc://`` URLs only).
        manager: share this Manager's registry and options instead (not with ``url``/``token``);
            it need not be open, and is not opened: the client opens a copy of its own.
        call_timeout: seconds a call other than a result wait may take before ``TimeoutError``
            (None: no limit).
        codec: as ``Manager(codec=...)``, for a client by URL (``manager=`` brings its own):
            what it starts and signals is sealed, what it reads is opened.
        unavailable_timeout: as ``Manager(unavailable_timeout=...)``, for a client by URL
            (``manager=`` brings its own): seconds a start, a signal with a ``dedupe_id``, a
            cancel, a status or a result wait rides through an outage of the database or the
            Engine Server before ``EngineUnavailable``. Keep it below ``call_timeout``, which
            bounds every call but a result wait.

    Use it as a context manager, or call ``close()`` when done. Create it after forking.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        manager: ClientManager | None = None,
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
        codec: Any = None,
        unavailable_timeout: float | None = None,
    ) -> None:
        if manager is not None:
            own = (url, token, codec, unavailable_timeout)
            if any(value is not None for value in own):
                raise ValueError(
                    "pass either manager= or url/token/codec/unavailable_timeout, not both"
                )
            self._manager = manager.client_copy()
        else:
            if _default_manager is None:
                raise RuntimeError("import sagaway before creating a SyncClient")
            options: dict[str, Any] = {"token": token, "codec": codec}
            if unavailable_timeout is not None:
                options["unavailable_timeout"] = unavailable_timeout
            self._manager = _default_manager(url, **options)
        if call_timeout is not None and call_timeout <= 0:
            raise ValueError("call_timeout must be > 0 seconds (or None)")
        self.call_timeout = call_timeout
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._session: contextlib.AbstractAsyncContextManager[Any] | None = None
        self._in_flight: set[concurrent.futures.Future[Any]] = set()
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._session is not None else "new"
        return f"SyncClient({self.url!r}, {state})"

    @property
    def url(self) -> str:
        return self._manager.url

    # ------------------------------------------------------------------ workflows

    @overload
    def start(
        self,
        workflow: Callable[..., Coroutine[Any, Any, R]],
        /,
        *args: Any,
        key: str | None = None,
        on_conflict: OnConflict = OnConflict.ATTACH,
        deadline: float | None = None,
        task_queue: str = "default",
        timeout: float | None = None,
        ordering_key: str | None = None,
        debounce_key: str | None = None,
        debounce: float | None = None,
        debounce_max_wait: float | None = None,
        priority: int | None = None,
        fairness_key: str | None = None,
        fairness_weight: float | None = None,
        **kwargs: Any,
    ) -> SyncWorkflowHandle[R]: ...

    @overload
    def start(
        self,
        workflow: str,
        /,
        *args: Any,
        key: str | None = None,
        on_conflict: OnConflict = OnConflict.ATTACH,
        deadline: float | None = None,
        task_queue: str = "default",
        timeout: float | None = None,
        ordering_key: str | None = None,
        debounce_key: str | None = None,
        debounce: float | None = None,
        debounce_max_wait: float | None = None,
        priority: int | None = None,
        fairness_key: str | None = None,
        fairness_weight: float | None = None,
        **kwargs: Any,
    ) -> SyncWorkflowHandle[Any]: ...

    def start(
        self,
        workflow: Callable[..., Coroutine[Any, Any, Any]] | str,
        /,
        *args: Any,
        key: str | None = None,
        on_conflict: OnConflict = OnConflict.ATTACH,
        deadline: float | None = None,
        task_queue: str = "default",
        timeout: float | None = None,
        **kwargs: Any,
    ) -> SyncWorkflowHandle[Any]:
        """Start ``workflow`` under ``key`` (default: a new random key), or join the execution
        the key names (``on_conflict``), and return a handle.

        ``workflow`` is a registered function or a workflow name. A name this client's
        registry lacks is started for a worker that registered it: arguments by parameter name
        only, as JSON values, and ``task_queue`` says which workers run it. ``deadline`` is the
        workflow's, in seconds from its start (it is cancelled past it), not a wait;
        ``timeout=`` is its deprecated old name. ``ordering_key``, ``debounce_key``,
        ``debounce``, ``debounce_max_wait``, ``priority``, ``fairness_key``,
        ``fairness_weight``: as ``execute()`` takes them (docs/limits.md); these names, like
        ``key`` and ``deadline``, are the start's options, not the workflow's arguments.
        """
        deadline = _renamed.deadline("SyncClient.start()", timeout, deadline)
        go = functools.partial(
            sync_starts.start,
            self._manager,
            workflow,
            args,
            kwargs,
            key=key,
            on_conflict=on_conflict,
            deadline=deadline,
            task_queue=task_queue,
        )
        return SyncWorkflowHandle(self, self._call(go))

    @overload
    def execute_get(
        self,
        workflow: Callable[..., Coroutine[Any, Any, R]],
        /,
        *args: Any,
        key: str | None = None,
        on_conflict: OnConflict = OnConflict.ATTACH,
        deadline: float | None = None,
        wait_timeout: float | None = None,
        task_queue: str = "default",
        timeout: float | None = None,
        ordering_key: str | None = None,
        debounce_key: str | None = None,
        debounce: float | None = None,
        debounce_max_wait: float | None = None,
        priority: int | None = None,
        fairness_key: str | None = None,
        fairness_weight: float | None = None,
        **kwargs: Any,
    ) -> R: ...

    @overload
    def execute_get(
        self,
        workflow: str,
        /,
        *args: Any,
        key: str | None = None,
        on_conflict: OnConflict = OnConflict.ATTACH,
        deadline: float | None = None,
        wait_timeout: float | None = None,
        task_queue: str = "default",
        timeout: float | None = None,
        ordering_key: str | None = None,
        debounce_key: str | None = None,
        debounce: float | None = None,
        debounce_max_wait: float | None = None,
        priority: int | None = None,
        fairness_key: str | None = None,
        fairness_weight: float | None = None,
        **kwargs: Any,
    ) -> Any: ...

    def execute_get(
        self,
        workflow: Callable[..., Coroutine[Any, Any, Any]] | str,
        /,
        *args: Any,
        key: str | None = None,
        on_conflict: OnConflict = OnConflict.ATTACH,
        deadline: float | None = None,
        wait_timeout: float | None = None,
        task_queue: str = "default",
        timeout: float | None = None,
        **kwargs: Any,
    ) -> Any:
        """Start ``workflow`` (as ``start``, ``deadline`` the workflow's) and wait for its
        result, ``wait_timeout`` seconds at most (``timeout=`` is the deprecated old name of
        ``deadline``, not a wait: it came before the async API's names).

        Raises the workflow's completable error when it FAILED, ``WorkflowCancelled`` when it
        was cancelled or terminated, ``TimeoutError`` when ``wait_timeout`` seconds passed
        first (the workflow runs on: wait again with ``get_workflow(key).result()``). The
        order, debounce, priority and fairness options: as ``start``'s.
        """
        handle = self.start(
            workflow,
            *args,
            key=key,
            on_conflict=on_conflict,
            deadline=_renamed.deadline("SyncClient.execute_get()", timeout, deadline),
            task_queue=task_queue,
            **kwargs,
        )
        return handle.result(timeout=wait_timeout)

    def get_workflow(self, key: str) -> SyncWorkflowHandle[Any]:
        """A handle for the workflow under ``key`` at once (no I/O; its methods raise
        ``WorkflowNotFound`` for an unknown key)."""
        self._check_usable()
        return SyncWorkflowHandle(self, self._manager.get_workflow(key))

    def signal(
        self, key: str, name: str, payload: Any = None, *, dedupe_id: str | None = None
    ) -> bool:
        """Send signal ``name`` with ``payload`` to the workflow under ``key``; False when
        ``dedupe_id`` was already delivered. Raises as ``manager.signal(name).send``."""
        manager = self._manager
        return self._call(lambda: manager.signal(name).send(key, payload, dedupe_id=dedupe_id))

    def cancel(self, key: str, reason: str = "cancelled by request") -> bool:
        """Ask the workflow under ``key`` to cancel (it compensates); False if it had ended."""
        manager = self._manager
        return self._call(lambda: manager.cancel(key, reason))

    def terminate(self, key: str, reason: str = "terminated by operator") -> bool:
        """End the workflow under ``key`` at once, without compensating; False if it had ended."""
        manager = self._manager
        return self._call(lambda: manager.terminate(key, reason))

    def batch(
        self,
        action: BatchAction | str,
        filter: WorkflowFilter,
        *,
        timeout: float | None = None,
        **options: Unpack[BatchOptions],
    ) -> BatchReport:
        """Apply ``action`` (cancel, terminate, retry, signal) to every workflow ``filter``
        selects, with ``Manager.batch``'s options (``on_item`` is called on the client's loop
        thread); waits ``timeout`` seconds at most (None: until it is done)."""
        manager = self._manager
        return self._call_within(lambda: manager.batch(action, filter, **options), timeout)

    # ------------------------------------------------------------------ plumbing

    def _check_usable(self) -> None:
        if os.getpid() != self._pid:
            raise errors.ManagerStateError(
                f"this SyncClient was created in process {self._pid} and is used in process "
                f"{os.getpid()}, a fork of it: its event-loop thread did not survive the fork. "
                "Create the client after forking (e.g. in each gunicorn worker, not at import "
                "time in the master)"
            )
        if self._closed:
            raise errors.ManagerStateError("this SyncClient is closed: create a new one")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        raise errors.ManagerStateError(
            "SyncClient blocks, so it cannot be called from async code (a running event loop "
            "in this thread): use the async API instead, in `async with manager.connect():` "
            "(`await manager.workflow(...).execute_get()`, `await handle.result()`)"
        )

    def _ensure_open(self) -> asyncio.AbstractEventLoop:
        self._check_usable()
        with self._lock:
            if self._closed:
                raise errors.ManagerStateError("this SyncClient is closed: create a new one")
            if self._loop is None:
                self._loop, self._thread = loop_thread.start("sagaway-sync-client")
            if self._session is None:
                session = self._manager.connect()
                opened = asyncio.run_coroutine_threadsafe(session.__aenter__(), self._loop)
                loop_thread.wait(opened, self.call_timeout, self._closed_meanwhile)
                self._session = session
            return self._loop

    def open(self) -> SyncClient:
        """Open now (otherwise the first call does): start the loop thread, connect."""
        self._ensure_open()
        return self

    def _call(self, make: Callable[[], Awaitable[T]]) -> T:
        """Run ``make()`` on the loop and wait for it (``call_timeout`` at most)."""
        return self._call_within(make, self.call_timeout)

    def _call_within(self, make: Callable[[], Awaitable[T]], limit: float | None) -> T:
        """Run ``make()`` on the loop and wait for it (``limit`` seconds at most)."""
        loop = self._ensure_open()
        future = asyncio.run_coroutine_threadsafe(loop_thread.invoke(make), loop)
        with self._lock:
            self._in_flight.add(future)
        try:
            return loop_thread.wait(future, limit, self._closed_meanwhile)
        finally:
            with self._lock:
                self._in_flight.discard(future)

    def _closed_meanwhile(self) -> bool:
        return self._closed

    def close(self, timeout: float = 30.0) -> None:
        """Close the Manager and stop the loop thread; calls waiting meanwhile are ended with
        ``ManagerStateError``. Idempotent. In a forked child it only marks the client closed."""
        if os.getpid() != self._pid:
            self._closed = True
            return
        with self._lock:
            if self._closed:
                return
            loop, thread, session = self._loop, self._thread, self._session
            if loop is not None:
                try:
                    asyncio.get_running_loop()
                except RuntimeError:
                    pass
                else:
                    raise errors.ManagerStateError(
                        "close() blocks: call it from synchronous code, not a running event loop"
                    )
            self._closed = True
            in_flight = list(self._in_flight)
            self._session = None
        for future in in_flight:
            future.cancel()
        if loop is None or thread is None:
            return
        try:
            if session is not None:
                done = asyncio.run_coroutine_threadsafe(session.__aexit__(None, None, None), loop)
                done.result(timeout)
        except Exception:
            logger.exception("closing the SyncClient's Manager failed")
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout)

    def __enter__(self) -> SyncClient:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
