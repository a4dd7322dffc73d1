"""Group commit: requests that arrive while a batch is being written go together in the next one.

Under light load every request is written at once, alone, by the task that made it (no added
latency, no task hop); under load, the requests of many workflows share one statement and one round
trip. Requests that arrive while a write is under way queue; one asyncio writer task per kind of
request drains the queue in batches. Reads of one kind (many clients waiting for results) are
batched the same way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from sagaway import observe

Item = TypeVar("Item")
Outcome = TypeVar("Outcome")

WriteBatch = Callable[[list[Item]], Awaitable[list[Outcome | BaseException]]]
"""Writes a batch; returns, per item and in order, its outcome or the error to raise for it."""


class GroupCommit(Generic[Item, Outcome]):
    """Batches concurrent requests of one kind into single statements."""

    def __init__(
        self,
        write: WriteBatch[Item, Outcome],
        *,
        name: str,
        max_batch: int,
        unique: Callable[[Item], Hashable] | None = None,
    ) -> None:
        """``name``: the kind of request, as telemetry reports it. ``unique(item)``: items with
        equal keys never share a batch (a statement cannot write one row twice); a repeat waits
        for the next batch, so order is kept."""
        self._name = name
        self._write_batch = write
        self._max = max_batch
        self._unique = unique
        self._queue: list[tuple[Item, asyncio.Future[Outcome]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._inflight: list[tuple[Item, asyncio.Future[Outcome]]] = []
        self._inline = False  # a request is being written alone by its own task

    async def submit(self, item: Item, *, alone: bool = False) -> Outcome:
        """The outcome of writing ``item``; ``alone``: at once in a statement of its own (a
        large payload, kept out of shared batches)."""
        if alone:
            outcome = await self._write_alone(item)
        elif self._idle():
            # Nothing else is being written: write it now, in this task.
            self._inline = True
            try:
                outcome = await self._write_alone(item)
            finally:
                self._inline = False
                if self._queue:  # what arrived meanwhile goes in the next batch
                    self._start_writer()
        else:
            future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
            self._queue.append((item, future))
            if not self._inline:
                self._start_writer()
            return await future
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _idle(self) -> bool:
        return (
            not self._inline and not self._queue and (self._writer is None or self._writer.done())
        )

    def _start_writer(self) -> None:
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._drain())
            self._writer.add_done_callback(self._writer_done)

    def _next_batch(self) -> list[tuple[Item, asyncio.Future[Outcome]]]:
        if self._unique is None and len(self._queue) <= self._max:
            everything, self._queue = self._queue, []
            return everything
        batch: list[tuple[Item, asyncio.Future[Outcome]]] = []
        later: list[tuple[Item, asyncio.Future[Outcome]]] = []
        keys: set[Hashable] = set()
        for entry in self._queue:
            key = self._unique(entry[0]) if self._unique is not None else None
            if len(batch) >= self._max or (key is not None and key in keys):
                later.append(entry)
            else:
                batch.append(entry)
            keys.add(key)
        self._queue = later
        return batch

    async def _drain(self) -> None:
        while self._queue:
            self._inflight = self._next_batch()
            batch = self._inflight
            try:
                outcomes = await self._write([item for item, _ in batch])
            except Exception as exc:
                if len(batch) == 1:
                    outcomes = [exc]
                else:
                    # One bad request (a value the database refuses) must not fail the others:
                    # write each alone, so each gets its own answer.
                    outcomes = [await self._write_alone(item) for item, _ in batch]
            self._inflight = []
            self._deliver(batch, outcomes)

    def _write(self, items: list[Item]) -> Awaitable[list[Outcome | BaseException]]:
        # Without telemetry the write is awaited directly: no extra coroutine per batch.
        if not observe.observers:
            return self._write_batch(items)
        return self._timed_write(items)

    async def _timed_write(self, items: list[Item]) -> list[Outcome | BaseException]:
        began = time.perf_counter()
        try:
            return await self._write_batch(items)
        finally:
            observe.batch_written(self._name, len(items), time.perf_counter() - began)

    def _writer_done(self, task: asyncio.Task[None]) -> None:
        # The writer was stopped (cancelled, event loop closing) or broke: nobody would answer
        # the requests it held or that were waiting, so answer them now.
        if not task.cancelled() and task.exception() is None:
            return
        error: BaseException | None = None if task.cancelled() else task.exception()
        pending, self._inflight = self._inflight + self._queue, []
        self._queue = []
        for _, future in pending:
            if future.done():
                continue
            if error is None:
                future.cancel()
            else:
                future.set_exception(error)

    async def _write_alone(self, item: Item) -> Outcome | BaseException:
        try:
            [outcome] = await self._write([item])
        except Exception as exc:
            return exc
        return outcome

    @staticmethod
    def _deliver(
        batch: list[tuple[Item, asyncio.Future[Outcome]]],
        outcomes: list[Outcome | BaseException],
    ) -> None:
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if future.done():
                continue  # its caller gave up (cancelled)
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
