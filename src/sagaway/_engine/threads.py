"""A thread pool for synchronous activities whose threads never hold up process exit.

``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter exits, even
after ``shutdown(wait=False)``: a process whose Manager has closed would wait for a blocked sync
activity for as long as it blocks. An activity cut off that way is not lost: its outcome was
never recorded and the workflow's lease was released, so it runs again (activities run at least
once; their idempotency key makes the effect happen once). So the threads here are daemons, and
nothing waits for them at exit.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_Item = tuple["concurrent.futures.Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DaemonThreadPool(concurrent.futures.Executor):
    """Up to ``max_workers`` daemon threads, started on demand and reused."""

    def __init__(self, max_workers: int, thread_name_prefix: str) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be >= 1")
        self._max = max_workers
        self._prefix = thread_name_prefix
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._shutdown = False

    def submit(
        self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> concurrent.futures.Future[T]:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("the activity thread pool is shut down")
            future: concurrent.futures.Future[T] = concurrent.futures.Future()
            self._queue.put((future, fn, args, kwargs))
            if not self._idle.acquire(timeout=0) and len(self._threads) < self._max:
                thread = threading.Thread(
                    target=self._work,
                    name=f"{self._prefix}_{len(self._threads)}",
                    daemon=True,
                )
                thread.start()
                self._threads.append(thread)
            return future

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args, kwargs = item
            del item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # SystemExit too: the caller decides what it means
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn, args, kwargs
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            if cancel_futures:
                while True:
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is not None:
                        item[0].cancel()
            for _ in self._threads:
                self._queue.put(None)  # each thread ends after the work it is doing
            threads = list(self._threads)
        if wait:
            for thread in threads:
                thread.join()
