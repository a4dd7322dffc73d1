"""Events and streams: what a running workflow publishes for others to read while it runs.

Inside a workflow:

- ``await sw.set_event("phase", "charging")``: a durable key/value event; a later value of the
  key replaces it for readers (every value stays in the workflow's published log);
- ``await sw.write_stream("tokens", "Hel", "lo")``: append items to a durable stream; each gets
  the next offset of its stream (0, 1, 2, ...).

Each call is one durable step: written with what it publishes in one transaction, never again
on a replay, so readers see each item exactly once and in order, across crashes and restarts.

Outside (``WorkflowHandle``): ``await handle.get_event("phase", timeout=30)`` waits for a key;
``async for item in handle.read_stream("tokens", offset=0)`` follows a stream until the workflow
has ended and every item is read; ``handle.outputs(after=0)`` follows everything it publishes
(``sagaway events KEY --follow``). A reader that stops and comes back with the next offset (or
seq) it wants misses nothing and sees nothing twice: offsets are the database's. Readers wake on
the store's notices (PostgreSQL, the Engine Server's Watch) or this process's own publications,
and poll otherwise. See docs/events.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from sagaway import errors, serialization
from sagaway._engine import outages, publishing
from sagaway._engine.end_wait import FIRST_DELAY
from sagaway._engine.engine import Engine
from sagaway._engine.executor import current_execution
from sagaway._engine.text_checks import check_plain
from sagaway.clock import wait_event_or_sleep
from sagaway.store.records import OutputRecord, OutputWrite, WorkflowRecord

MAX_NAME = 200
PAGE = 500
"""Items read per store call while following."""


@dataclasses.dataclass(frozen=True, slots=True)
class OutputItem:
    """One thing a workflow published, as a reader gets it."""

    seq: int
    """Its place among everything the execution published, from 1: ``outputs(after=seq)``
    resumes after it."""
    kind: str
    """``event`` or ``stream``."""
    name: str
    """The event's key or the stream's name."""
    offset: int
    """A stream item's place in its stream, from 0: ``read_stream(name, offset=offset + 1)``
    resumes after it (an event's: how many values its key had before)."""
    value: Any
    at: float
    """When it was published (epoch seconds)."""


class EventNotSet(errors.SagawayError):
    """The workflow ended without setting the event that was waited for."""

    def __init__(self, key: str, event: str) -> None:
        super().__init__(f"workflow {key!r} ended without setting event {event!r}")
        self.key = key
        self.event = event


# ----------------------------------------------------------------------------- writing


async def set_event(key: str, value: Any) -> None:
    """Inside a workflow: publish ``value`` (JSON-serialisable) as the event ``key``."""
    check_name(key, "event key")
    execution = _execution("sw.set_event()")
    data = serialization.encode_value(value, f"event {key!r}", execution.engine.payload_limit)
    write = OutputWrite(kind="event", name=key, value=data)
    await publishing.publish(execution, f"event {key}", outputs=[write])


async def write_stream(stream: str, *values: Any) -> None:
    """Inside a workflow: append ``values`` (each JSON-serialisable) to ``stream``, in one
    durable step."""
    check_name(stream, "stream name")
    if not values:
        raise ValueError("write_stream() needs at least one value to append")
    execution = _execution("sw.write_stream()")
    limit = execution.engine.payload_limit
    writes = [
        OutputWrite(kind="stream", name=stream, value=serialization.encode_value(v, what, limit))
        for v, what in ((v, f"item of stream {stream!r}") for v in values)
    ]
    await publishing.publish(execution, f"stream {stream}", outputs=writes)


def _execution(what: str) -> Any:
    execution = current_execution()
    if execution is None:
        raise errors.SagawayError(
            f"{what} publishes from the running workflow: call it in workflow code (to read: "
            "handle.get_event(), handle.read_stream(), `sagaway events KEY`)"
        )
    return execution


def check_name(name: object, what: str) -> None:
    """``ValueError`` unless ``name`` is a usable event key or stream name (``what``)."""
    if not isinstance(name, str) or not name or len(name) > MAX_NAME:
        raise ValueError(f"a {what} is 1 to {MAX_NAME} characters, not {name!r}")
    check_plain(name, what)


# ----------------------------------------------------------------------------- reading


def output(record: OutputRecord) -> OutputItem:
    value = serialization.load_json(record.value, f"{record.kind} {record.name!r}")
    return OutputItem(record.seq, record.kind, record.name, record.offset, value, record.at)


async def get_event(engine: Engine, run: WorkflowRecord, event: str, timeout: float | None) -> Any:
    """The value of ``event`` once ``run`` has set it (see ``WorkflowHandle.get_event``)."""
    check_name(event, "event key")
    follower = _Follower(engine, run, timeout)
    try:
        while True:
            ended = await follower.ended()
            found = await outages.ride(
                engine,
                f"event {event!r} of {run.key!r}",
                lambda: engine.store.get_event(run.run_id, key=event),
            )
            if found is not None:
                return output(found).value
            if ended:
                raise EventNotSet(run.key, event)
            await follower.pause(f"event {event!r} of workflow {run.key!r} not set")
    finally:
        follower.close()


def read_stream(
    engine: Engine,
    run: WorkflowRecord,
    stream: str,
    offset: int,
    *,
    follow: bool,
    timeout: float | None,
) -> AsyncIterator[OutputItem]:
    """See ``WorkflowHandle.read_stream``."""
    check_name(stream, "stream name")
    start = [max(0, offset)]

    def read() -> Awaitable[list[OutputRecord]]:
        return engine.store.read_stream(run.run_id, stream=stream, offset=start[0], limit=PAGE)

    def advance(item: OutputRecord) -> None:
        start[0] = item.offset + 1

    return _follow(engine, run, read, advance, follow=follow, timeout=timeout)


def outputs(
    engine: Engine, run: WorkflowRecord, after: int, *, follow: bool, timeout: float | None
) -> AsyncIterator[OutputItem]:
    """See ``WorkflowHandle.outputs``."""
    start = [max(0, after)]

    def read() -> Awaitable[list[OutputRecord]]:
        return engine.store.read_outputs(run.run_id, after=start[0], limit=PAGE)

    def advance(item: OutputRecord) -> None:
        start[0] = item.seq

    return _follow(engine, run, read, advance, follow=follow, timeout=timeout)


async def _follow(
    engine: Engine,
    run: WorkflowRecord,
    read: Callable[[], Awaitable[list[OutputRecord]]],
    advance: Callable[[OutputRecord], None],
    *,
    follow: bool,
    timeout: float | None,
) -> AsyncIterator[OutputItem]:
    """Yield what ``read()`` returns, page after page (``advance`` moves its start past each
    item), until the run has ended and nothing is left (``follow``; else until nothing is left
    now). The end is read before the last page: what was published before it is in that page."""
    follower = _Follower(engine, run, timeout)
    try:
        while True:
            ended = (await follower.ended()) or not follow
            page = await outages.ride(engine, f"outputs of workflow {run.key!r}", read)
            for record in page:
                advance(record)
                yield output(record)
            if len(page) >= PAGE:
                continue
            if ended:
                return
            await follower.pause(f"workflow {run.key!r} did not end")
    finally:
        follower.close()


class _Follower:
    """The wait between reads of one reader: woken by this process's publications and the
    store's notices of the run (``WorkflowChanged``), polling from 20 ms up to the engine's
    ``poll_interval`` when notices do not flow; its deadline fixed at the start."""

    def __init__(self, engine: Engine, run: WorkflowRecord, timeout: float | None) -> None:
        self.engine = engine
        self.run = run
        self.timeout = timeout
        self.deadline = None if timeout is None else engine.clock.now() + timeout
        self.watch = engine.channel.watch(run.run_id)
        self.delay = FIRST_DELAY

    async def ended(self) -> bool:
        """Whether the run has ended (read, unless already seen); clears the wake-up first,
        so a change after this read wakes the next pause."""
        self.watch.clear()
        if self.run.status.ended:
            return True
        engine = self.engine
        record = await outages.ride(
            engine, f"workflow {self.run.key!r}", lambda: engine.get_run(self.run.run_id)
        )
        if record is None:
            raise errors.WorkflowNotFound(self.run.key)
        self.run = record
        engine.want_ends()  # PostgreSQL: the channel of every run's ends and publications
        return record.status.ended

    async def pause(self, why: str) -> None:
        engine, clock = self.engine, self.engine.clock
        if engine.notifications and engine.end_notices is not False:
            seconds = engine.poll_interval  # a notice wakes us; the read is a safety net
        else:
            seconds, self.delay = self.delay, min(self.delay * 2, engine.poll_interval)
        if self.deadline is not None:
            left = self.deadline - clock.now()
            if left <= 0:
                raise TimeoutError(f"{why} within {self.timeout}s")
            seconds = min(seconds, left)
        await wait_event_or_sleep(self.watch, clock, seconds)
        if self.watch.is_set():
            self.delay = FIRST_DELAY

    def close(self) -> None:
        self.engine.channel.unwatch(self.run.run_id, self.watch)
