"""Calls to the Engine Server made at the same moment go together, in one Batch RPC.

A process with many workflows in flight makes many small calls at once (each workflow's next
step). Sent one by one, each costs a gRPC round trip and its CPU on both sides; queued while a
batch is on the wire and sent together, they cost one. A call made alone goes alone, at once:
one workflow at a time waits for nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sagaway import observe
from sagaway.v1 import engine_pb2 as pb

_METHODS = pb.DESCRIPTOR.services_by_name["Engine"].methods_by_name
MAX_IN_FLIGHT = 2
"""Batches on the wire at once; calls made meanwhile wait for the next one."""
MAX_CALLS = 256


@dataclasses.dataclass(slots=True)
class _Pending:
    method: str
    request: Any
    size: int
    future: asyncio.Future[Any]


def reply_class(method: str) -> Any:
    """The reply message class of an Engine RPC."""
    return getattr(pb, _METHODS[method].output_type.name)


class Batcher:
    """Sends calls alone (``send_one``) or together (``send_many``), at most
    ``MAX_IN_FLIGHT`` sends at a time, each batch under ``max_bytes`` of requests."""

    def __init__(
        self,
        send_one: Callable[[str, Any], Awaitable[Any]],
        send_many: Callable[[list[tuple[str, Any]]], Awaitable[list[Any]]],
        *,
        max_bytes: int,
    ) -> None:
        self._send_one = send_one
        self._send_many = send_many
        self.max_bytes = max_bytes
        self._pending: list[_Pending] = []
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    async def call(self, method: str, request: Any) -> Any:
        """The reply to ``request``, or the exception its call ended with."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(method, request, request.ByteSize(), future))
        self._send_next()
        return await future

    def _take(self) -> list[_Pending]:
        taken: list[_Pending] = []
        size = 0
        while self._pending and len(taken) < MAX_CALLS:
            item = self._pending[0]
            if taken and size + item.size > self.max_bytes:
                break
            taken.append(self._pending.pop(0))
            size += item.size
        return [item for item in taken if not item.future.done()]  # drop calls given up

    def _send_next(self) -> None:
        while not self._closed and self._pending and self._in_flight < MAX_IN_FLIGHT:
            batch = self._take()
            if not batch:
                continue
            self._in_flight += 1
            task = asyncio.create_task(self._send(batch), name="sagaway-grpc-batch")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: list[_Pending]) -> None:
        began = time.perf_counter()
        try:
            if len(batch) == 1:
                first = batch[0]
                outcomes: list[Any] = [await _outcome(self._send_one(first.method, first.request))]
            else:
                outcomes = await self._send_many([(item.method, item.request) for item in batch])
        except asyncio.CancelledError:
            for item in batch:
                item.future.cancel()
            raise
        except Exception as exc:  # the batch as a whole failed: every call in it did
            outcomes = [exc] * len(batch)
        finally:
            self._in_flight -= 1
            self._send_next()
            if observe.observers:
                observe.batch_written("server_calls", len(batch), time.perf_counter() - began)
        for item, outcome in zip(batch, outcomes, strict=True):
            if item.future.done():
                continue
            if isinstance(outcome, BaseException):
                item.future.set_exception(outcome)
            else:
                item.future.set_result(outcome)

    def close(self) -> None:
        self._closed = True
        for task in self._tasks:
            task.cancel()
        for item in self._pending:
            if not item.future.done():
                item.future.cancel()
        self._pending.clear()


async def _outcome(call: Awaitable[Any]) -> Any:
    try:
        return await call
    except Exception as exc:
        return exc
