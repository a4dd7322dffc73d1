"""DaemonThreadPool: the Executor contract, with daemon threads that process exit ignores."""

from __future__ import annotations

import sys
import threading

import pytest

from sagaway._engine.threads import DaemonThreadPool


def test_runs_work_and_carries_every_exception() -> None:
    pool = DaemonThreadPool(2, thread_name_prefix="t")
    try:
        assert pool.submit(lambda a, b: a + b, 2, b=3).result(timeout=10) == 5
        with pytest.raises(ValueError, match="bad"):
            pool.submit(_raise, ValueError("bad")).result(timeout=10)
        # A BaseException is handed to the caller, and the thread goes on serving.
        with pytest.raises(SystemExit):
            pool.submit(sys.exit, 3).result(timeout=10)
        assert pool.submit(lambda: 1).result(timeout=10) == 1
    finally:
        pool.shutdown()


def test_threads_are_daemons_reused_and_bounded() -> None:
    pool = DaemonThreadPool(2, thread_name_prefix="t")
    release = threading.Event()
    names: list[str] = []
    started = threading.Semaphore(0)

    def hold() -> None:
        names.append(threading.current_thread().name)
        assert threading.current_thread().daemon
        started.release()
        release.wait(10)

    try:
        futures = [pool.submit(hold) for _ in range(3)]
        assert started.acquire(timeout=10) and started.acquire(timeout=10)
        # Two threads at most: the third call waits for one of them.
        assert not started.acquire(timeout=0.05)
        release.set()
        for future in futures:
            future.result(timeout=10)
        assert len(set(names)) == 2
    finally:
        pool.shutdown()


def test_shutdown_cancels_queued_work_and_refuses_more() -> None:
    pool = DaemonThreadPool(1, thread_name_prefix="t")
    release = threading.Event()
    running = pool.submit(release.wait, 10)
    queued = pool.submit(lambda: "never")
    pool.shutdown(wait=False, cancel_futures=True)
    assert queued.cancelled()
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(lambda: None)
    release.set()
    assert running.result(timeout=10) is True


def _raise(exc: BaseException) -> None:
    raise exc
