"""Client calls through an outage of the database or of the Engine Server.

A call a client makes (a start, a signal with a ``dedupe_id``, a cancel, a read of a workflow,
the wait of ``result()``) that meets ``StoreUnavailable`` is tried again, 50 ms later, then
twice as long each time up to a second apart, until it gets an answer or the outage has lasted
``unavailable_timeout`` seconds (``EngineOptions``, ``Manager(unavailable_timeout=...)``); then
it raises ``EngineUnavailable``, saying what was unreachable, for how long, and how to wait
longer. An outage is timed from the start of the first attempt that failed, so an attempt that
itself waited (PostgreSQL's ``pool_timeout``) counts.

Only calls that a second attempt cannot double are retried:

- a start: its execution (key and run id) is made once, before the first attempt, and every
  attempt creates that one; an attempt that finds it (an earlier one committed, its answer
  lost) reports it created. So a start without an idempotency key is retried too: its random
  key is drawn once and no one else uses it;
- a signal with a ``dedupe_id`` (a repeat is stored once; a retry whose first attempt was
  stored answers False, as a repeat does); one without is sent once (``once``): a retry could
  store it twice;
- a cancel request (recorded once, the first reason kept), and reads.

The engine's worker-side paths never come here: a workflow run that meets an outage is doomed
and resumes from its last record (``executor``), and its waits keep waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from sagaway import errors
from sagaway.clock import Clock
from sagaway.store.base import CreateResult, Store, StoreUnavailable
from sagaway.store.records import AuditNote, Lease, NewWorkflow

T = TypeVar("T")
logger = logging.getLogger(__name__)

FIRST_PAUSE = 0.05
"""Seconds before the first retry; doubled after each failure, up to ``MAX_PAUSE``."""
MAX_PAUSE = 1.0


class Options(Protocol):
    """What this module reads of ``EngineOptions``."""

    @property
    def unavailable_timeout(self) -> float: ...


class Engine(Protocol):
    """What this module uses of the Engine (which calls it), or of a reader that has none
    (``sagaway.reading``)."""

    store: Store
    clock: Clock

    @property
    def options(self) -> Options: ...


def where(url: str) -> str:
    """What a store at ``url`` reaches, for messages."""
    if url.lower().startswith("grpc"):
        return f"the Engine Server at {url}"
    if url.lower().startswith("postgres"):
        return f"PostgreSQL at {url}"
    return f"the database at {url}"


class Outage:
    """How long a client call has been without an answer.

    ``failed(exc, began)`` after each attempt that met ``StoreUnavailable``: the pause before
    the next, or ``EngineUnavailable`` once the outage has lasted ``unavailable_timeout``
    (``forever``: never, for the waits of workflow runs), or ``TimeoutError`` at ``deadline``
    (the caller's own limit, on the engine's clock). ``over()`` after an answer: the next
    failure starts a new outage.
    """

    def __init__(
        self,
        engine: Engine,
        what: str,
        *,
        deadline: float | None = None,
        forever: bool = False,
    ) -> None:
        self._clock = engine.clock
        self._where = where(engine.store.url)
        self.what = what
        self.budget = None if forever else engine.options.unavailable_timeout
        self.deadline = deadline
        self.since: float | None = None
        self._pause = FIRST_PAUSE

    def failed(self, exc: StoreUnavailable, began: float) -> float:
        if self.since is None:
            self.since = began
        now = self._clock.now()
        waited = now - self.since
        if self.budget is not None and waited >= self.budget:
            raise errors.EngineUnavailable(
                f"{self.what}: {self._where} did not answer for {waited:.1f} s, longer than "
                f"this client waits through an outage (unavailable_timeout={self.budget:g} s: "
                f"Manager(unavailable_timeout=...) or SyncClient(unavailable_timeout=...) "
                f"changes it); last error: {exc}",
                waited=waited,
            ) from exc
        if self.deadline is not None and now >= self.deadline:
            raise TimeoutError(
                f"{self.what}: no answer before the timeout ({self._where} did not answer "
                f"for {waited:.1f} s; last error: {exc})"
            ) from exc
        pause = self._pause
        self._pause = min(pause * 2, MAX_PAUSE)
        if self.budget is not None:
            pause = min(pause, self.since + self.budget - now)
        if self.deadline is not None:
            pause = min(pause, self.deadline - now)
        logger.warning(
            "%s: %s (unavailable for %.1f s); trying again",
            self.what,
            exc,
            waited,
            extra={"action": "wait_unavailable", "call": self.what},
        )
        return max(pause, 0.0)

    def over(self) -> None:
        self.since = None
        self._pause = FIRST_PAUSE


async def ride(
    engine: Engine, what: str, call: Callable[[], Awaitable[T]], *, outage: Outage | None = None
) -> T:
    """``call()``'s answer, tried again through an outage (see the module's docstring)."""
    outage = outage or Outage(engine, what)
    while True:
        began = engine.clock.now()
        try:
            answer = await call()
        except StoreUnavailable as exc:
            await engine.clock.sleep(outage.failed(exc, began))
        else:
            outage.over()
            return answer


async def once(engine: Engine, what: str, call: Awaitable[T], why: str) -> T:
    """``call``'s answer, tried once: an outage is ``EngineUnavailable`` at once, with ``why``
    it is not tried again."""
    try:
        return await call
    except StoreUnavailable as exc:
        raise errors.EngineUnavailable(
            f"{what}: {where(engine.store.url)} did not answer ({exc}); {why}"
        ) from exc


async def create(
    engine: Engine,
    new: NewWorkflow,
    *,
    lease: Lease | None,
    replace_live: bool,
    client: bool,
    audit: AuditNote | None = None,
) -> CreateResult:
    """Create ``new`` (or find the execution under its key); a ``client``'s start rides
    through an outage, every attempt creating that same execution (and one ``audit`` entry)."""

    async def attempt() -> CreateResult:
        result = await engine.store.create_workflow(
            new, now=engine.clock.now(), lease=lease, replace_live=replace_live, audit=audit
        )
        if not result.created and result.record.run_id == new.run_id:
            # An earlier attempt committed, and its answer was lost: it is this start's.
            return CreateResult(result.record, True)
        return result

    if not client:
        return await attempt()
    return await ride(engine, f"start of workflow {new.key!r}", attempt)
