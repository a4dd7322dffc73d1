"""sw.SyncClient / manager.sync(): blocking calls from threads without an event loop, on every
backend. A Manager with workers runs the workflows in a thread of its own (its own loop), as a
``sagaway worker`` process would; the test thread only blocks."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sagaway as sw
import sagaway.sync
from tests.integration.sync_app import App, Order, OutOfStock, Receipt, make_app

WAIT = 20.0
"""Bound of every result wait: a broken client fails the test instead of hanging it."""


class Workers:
    """``async with manager`` in a thread of its own until ``stop()``."""

    def __init__(self, manager: sw.Manager) -> None:
        self.manager = manager
        self.ready = threading.Event()
        self.failed: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            async with self.manager:
                self.ready.set()
                await self._stop.wait()

        try:
            asyncio.run(main())
        except BaseException as exc:
            self.failed = exc
            self.ready.set()

    def start(self) -> None:
        self._thread.start()
        assert self.ready.wait(30), "the workers did not start"
        assert self.failed is None, self.failed

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        assert not self._thread.is_alive()


@pytest.fixture
def app(db_url: str) -> Iterator[App]:
    """The test workflows, run by workers on their own loop (another 'process')."""
    running = make_app(db_url)
    workers = Workers(running.manager)
    workers.start()
    try:
        yield running
    finally:
        workers.stop()


def test_start_then_result_decodes_into_the_return_type(app: App) -> None:
    with app.manager.sync() as client:
        handle = client.start(app.price, Order("tea", 3), key="order-1")
        assert isinstance(handle, sw.SyncWorkflowHandle)
        assert handle.key == "order-1"
        receipt = handle.result(timeout=WAIT)
        assert receipt == Receipt("tea", 21)
        assert isinstance(receipt, Receipt)
        assert handle.status() is sw.WorkflowStatus.COMPLETED
        description = handle.describe()
        assert description.status is sw.WorkflowStatus.COMPLETED
        assert [s.name for s in description.steps] == ["sync.unit_price"]
        # A second start under the key joins the finished execution; it runs nothing again.
        again = client.execute_get(app.price, Order("tea", 3), key="order-1", wait_timeout=WAIT)
        assert again == Receipt("tea", 21)
        # A registered name works like the function; a later handle by key reads the result.
        assert client.execute_get(
            "sync.price", Order("mug", 2), key="order-2", wait_timeout=WAIT
        ) == Receipt("mug", 6)
        assert client.get_workflow("order-2").result(timeout=WAIT) == Receipt("mug", 6)


def test_a_client_by_url_knows_names_only_and_returns_plain_json(app: App, db_url: str) -> None:
    with sw.SyncClient(db_url) as client:
        result = client.execute_get(
            "sync.price", order={"sku": "tea", "qty": 2}, key="plain-1", wait_timeout=WAIT
        )
        assert result == {"sku": "tea", "total": 14}
        # Arguments by name: in any order, with the worker decoding them by its annotations.
        handle = client.start("sync.approval", key="plain-2", who="ann")
        assert client.signal("plain-2", "approve", "yes")
        assert handle.result(timeout=WAIT) == "ann:yes"
        with pytest.raises(TypeError, match="by parameter name"):
            client.start("sync.price", {"sku": "tea", "qty": 1}, key="plain-3")
        with pytest.raises(sw.NotRegistered):
            client.start(app.price, Order("tea", 1), key="plain-4")  # not in its registry
        # A client that does not register the error type still raises a CompletableError.
        with pytest.raises(sw.CompletableError, match="no tea left"):
            client.execute_get("sync.refuse", sku="tea", key="plain-5", wait_timeout=WAIT)


def test_execute_get_raises_the_workflows_completable_error(app: App) -> None:
    with app.manager.sync() as client:
        with pytest.raises(OutOfStock, match="no tea left") as caught:
            client.execute_get(app.refuse, "tea", key="refused", wait_timeout=WAIT)
        assert caught.value.code == "stock"
        handle = client.get_workflow("refused")
        assert handle.status() is sw.WorkflowStatus.FAILED
        with pytest.raises(OutOfStock):
            handle.result(timeout=WAIT)


def test_signal_then_result_and_dedupe(app: App) -> None:
    with app.manager.sync() as client:
        handle = client.start(app.approval, "bob", key="approve-1")
        assert client.signal("approve-1", "approve", "granted", dedupe_id="cb-1") is True
        assert client.signal("approve-1", "approve", "granted", dedupe_id="cb-1") is False
        assert handle.result(timeout=WAIT) == "bob:granted"
        with pytest.raises(sw.SagawayError, match="ended"):
            client.signal("approve-1", "approve", "late")


def test_cancel_compensates_and_terminate_does_not(app: App) -> None:
    with app.manager.sync() as client:
        handle = client.start(app.hold, "room-1", key="hold-1")
        assert handle.cancel("guest left") is True
        with pytest.raises(sw.WorkflowCancelled, match="guest left"):
            handle.result(timeout=WAIT)
        assert handle.status() is sw.WorkflowStatus.CANCELLED
        assert app.released == ["room-1"]
        assert client.cancel("hold-1") is False  # already ended

        other = client.start(app.hold, "room-2", key="hold-2")
        assert client.cancel("hold-2", "by key") is True
        with pytest.raises(sw.WorkflowCancelled):
            other.result(timeout=WAIT)

        third = client.start(app.hold, "room-3", key="hold-3")
        assert client.terminate("hold-3", "operator") is True
        with pytest.raises(sw.WorkflowCancelled, match="operator"):
            third.result(timeout=WAIT)
        assert third.status() is sw.WorkflowStatus.TERMINATED
        assert app.released == ["room-1", "room-2"]


def test_unknown_keys_and_timeouts(app: App) -> None:
    with app.manager.sync() as client:
        ghost = client.get_workflow("no-such-key")  # no I/O yet
        with pytest.raises(sw.WorkflowNotFound):
            ghost.status()
        with pytest.raises(sw.WorkflowNotFound):
            ghost.describe()
        with pytest.raises(sw.WorkflowNotFound):
            ghost.result(timeout=1)
        with pytest.raises(sw.WorkflowNotFound):
            client.signal("no-such-key", "approve", "x")
        with pytest.raises(sw.WorkflowNotFound):
            client.cancel("no-such-key")

        waiting = client.start(app.approval, "cy", key="slow-1")
        with pytest.raises(TimeoutError):
            waiting.result(timeout=0.2)
        with pytest.raises(TimeoutError):
            client.execute_get(app.approval, "cy", key="slow-1", wait_timeout=0.2)
        # The timed-out waits left the client working and the workflow running.
        assert waiting.status() in (sw.WorkflowStatus.PENDING, sw.WorkflowStatus.WAITING,
                                    sw.WorkflowStatus.RUNNING)  # fmt: skip
        client.signal("slow-1", "approve", "late but fine")
        assert waiting.result(timeout=WAIT) == "cy:late but fine"


def test_twenty_threads_share_one_client(app: App) -> None:
    threads = 20
    barrier = threading.Barrier(threads)
    results: dict[int, Any] = {}
    failures: list[BaseException] = []

    def request(i: int, client: sw.SyncClient) -> None:
        try:
            barrier.wait(10)
            if i % 4 == 3:  # some requests fail as the business says
                try:
                    client.execute_get(app.refuse, f"sku{i}", key=f"t-{i}", wait_timeout=WAIT)
                except OutOfStock as exc:
                    results[i] = str(exc)
                return
            handle = client.start(app.price, Order(f"sku{i}", i), key=f"t-{i}")
            results[i] = handle.result(timeout=WAIT)
        except BaseException as exc:
            failures.append(exc)

    with app.manager.sync() as client:
        workers = [threading.Thread(target=request, args=(i, client)) for i in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join(60)
        assert not failures, failures
        assert len(results) == threads
        for i in range(threads):
            expected: Any = f"[stock] no sku{i} left" if i % 4 == 3 else Receipt(f"sku{i}", 3 * i)
            assert results[i] == expected
        for i in range(threads):
            status = client.get_workflow(f"t-{i}").status()
            failed = i % 4 == 3
            assert status is (sw.WorkflowStatus.FAILED if failed else sw.WorkflowStatus.COMPLETED)


# ---------------------------------------------------------------------- misuse (SQLite only:
# these are about the client's thread and lifecycle, not the backend)


@pytest.fixture
def sqlite_app(tmp_path: Path) -> Iterator[App]:
    running = make_app(f"sqlite:///{tmp_path}/sync.db")
    workers = Workers(running.manager)
    workers.start()
    try:
        yield running
    finally:
        workers.stop()


def test_use_from_inside_an_event_loop_is_refused(sqlite_app: App) -> None:
    client = sqlite_app.manager.sync()
    try:

        async def from_async_code() -> None:
            client.start(sqlite_app.price, Order("tea", 1), key="in-loop")

        with pytest.raises(sw.ManagerStateError, match="use the async API"):
            asyncio.run(from_async_code())
        # Nothing was started, and the client still works from synchronous code.
        with pytest.raises(sw.WorkflowNotFound):
            client.get_workflow("in-loop").status()

        async def close_from_async_code() -> None:
            client.close()

        with pytest.raises(sw.ManagerStateError, match="synchronous code"):
            asyncio.run(close_from_async_code())
    finally:
        client.close()


def test_a_closed_client_is_refused(sqlite_app: App) -> None:
    client = sqlite_app.manager.sync()
    handle = client.start(sqlite_app.price, Order("tea", 1), key="c-1")
    assert handle.result(timeout=WAIT) == Receipt("tea", 7)
    client.close()
    client.close()  # idempotent
    with pytest.raises(sw.ManagerStateError, match="closed"):
        client.start(sqlite_app.price, Order("tea", 1), key="c-2")
    with pytest.raises(sw.ManagerStateError, match="closed"):
        handle.status()
    with pytest.raises(sw.ManagerStateError, match="closed"):
        client.get_workflow("c-1")


def test_close_ends_a_wait_in_another_thread(sqlite_app: App) -> None:
    client = sqlite_app.manager.sync()
    handle = client.start(sqlite_app.approval, "dee", key="w-1")
    outcome: list[BaseException] = []
    waiting = threading.Event()

    def wait_for_it() -> None:
        waiting.set()
        try:
            handle.result()
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=wait_for_it)
    thread.start()
    assert waiting.wait(10)
    # Let the waiter reach its wait (the workflow waits for a signal that never comes). Should
    # close() come first all the same, the waiter is refused as closed: the same error type.
    deadline = time.monotonic() + 10
    while handle.status() is not sw.WorkflowStatus.WAITING and time.monotonic() < deadline:
        time.sleep(0.01)
    client.close()
    thread.join(10)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], sw.ManagerStateError), outcome


def test_use_in_a_forked_child_is_refused(sqlite_app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    client = sqlite_app.manager.sync()
    try:
        assert client.execute_get(
            sqlite_app.price, Order("tea", 2), key="f-1", wait_timeout=WAIT
        ) == Receipt("tea", 14)
        parent = os.getpid()
        # What os.getpid() says in a child of fork(): the client must notice it.
        monkeypatch.setattr(sagaway.sync.os, "getpid", lambda: parent + 1)
        with pytest.raises(sw.ManagerStateError, match="after forking"):
            client.get_workflow("f-1").status()
        with pytest.raises(sw.ManagerStateError, match="after forking"):
            client.start(sqlite_app.price, Order("tea", 2), key="f-2")
        monkeypatch.undo()
        assert client.get_workflow("f-1").status() is sw.WorkflowStatus.COMPLETED
    finally:
        client.close()


def test_a_client_takes_a_url_or_a_manager_not_both(tmp_path: Path) -> None:
    manager = sw.Manager(f"sqlite:///{tmp_path}/x.db")
    with pytest.raises(ValueError, match="not both"):
        sw.SyncClient(f"sqlite:///{tmp_path}/x.db", manager=manager)
    with pytest.raises(ValueError, match="call_timeout"):
        sw.SyncClient(f"sqlite:///{tmp_path}/x.db", call_timeout=0)
    # manager.sync() opens a copy of its own: the Manager itself stays closed and usable.
    client = manager.sync()
    client.close()
    assert manager.state is sw.ManagerState.CLOSED
