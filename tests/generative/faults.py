"""Faults injected at the Store boundary: a Store that wraps the real one.

Every store verb a process calls gets a number, counted over the whole scenario; the fault plan
names the numbers it hits and how: raise before the call reaches the database, raise after it
committed (a lost acknowledgement), crash the process before or after the call, restart it
gracefully after the call, or freeze it inside the call (a stall, so its lease expires). The
wrapper also tells the World what the database acknowledged (committed steps, created runs,
ends by request), which the invariants need.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import os
from collections import Counter
from collections.abc import Callable
from typing import Any

from sagaway.codecs import _places
from sagaway.states import StepKind, StepStatus
from sagaway.store import Store, notices
from tests.generative import purging, times_check
from tests.generative.world import InjectedDbError, Process, ProcessDead, World

_WRITES = frozenset(
    {
        "create_workflow",
        "fork_workflow",
        "record_step",
        "finish_workflow",
        "suspend_workflow",
        "release_workflow",
        "renew_leases",
        "claim_due",
        "end_workflow",
        "request_cancel",
        "retry_now",
        "send_signal",
        "receive_signal",
        "wait_workflow",
        "wait_for_child",
        "acquire_queue_slot",
        "renew_queue_slot",
        "release_queue_slot",
        "leave_queue",
    }
)
"""Store verbs that change the database: the durable boundaries faults are aimed at."""

_CLIENT_FAULTS: dict[str, str | None] = {
    "crash_before": "error_before",
    "crash_after": "lost_ack",
    "stall": None,
    "restart_after": None,
}


@dataclasses.dataclass
class Injector:
    """The fault plan of one scenario and what it did."""

    faults: dict[int, str]
    calls: int = 0
    injected: Counter[str] = dataclasses.field(default_factory=Counter)
    log: list[str] = dataclasses.field(default_factory=list)
    restart_requested: Process | None = None
    stall_requested: Process | None = None
    times_ahead: list[str] = dataclasses.field(default_factory=list)
    """Store calls that recorded a time ahead of the clock (``times_check``)."""

    def take(self, method: str) -> str | None:
        index = self.calls
        self.calls += 1
        kind = self.faults.get(index)
        if kind is not None:
            self.injected[kind] += 1
            self.log.append(f"{kind}@{index}:{method}")
        return kind


class FaultyStore:
    """Delegates every verb of ``inner``; injects the planned faults; reports to the World."""

    def __init__(
        self,
        inner: Store,
        injector: Injector,
        process: Process,
        world: World,
        *,
        client: bool,
        server_time: Callable[[], float | None],
    ) -> None:
        self._inner = inner
        self._server_time = server_time
        """The database's clock as every simulated process reads it (``Driver.server_time``)."""
        self._client = client
        """The client's store (a process without workers): it never crashes or stalls, its
        crash faults become plain errors."""
        self._injector = injector
        self._process = process
        self.process = process
        self._world = world
        self.inflight = 0
        self.began = 0
        """Calls begun so far: one that began and ended between two looks of the driver's
        ``wait_idle`` was work all the same."""
        self.calls_in_flight: Counter[str] = Counter()
        self.url = inner.url

    async def open(self) -> None:
        await self._inner.open()

    async def close(self) -> None:
        await self._inner.close()

    async def server_time(self) -> float | None:
        return self._server_time()

    async def listen(
        self, callback: notices.Callback, *, owner: str | None = None, ends: bool = True
    ) -> None:
        process = self._process

        def deliver(notice: notices.Notice) -> None:
            if not process.dead:  # a dead process hears nothing
                callback(notice)

        await self._inner.listen(deliver, owner=owner, ends=ends)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name.startswith("_") or not inspect.iscoroutinefunction(attr):
            return attr
        # Reads are not fault targets: faults land on durable boundaries.
        target = name in _WRITES

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._call(name, attr, args, kwargs, target)

        return call

    async def _call(
        self,
        name: str,
        method: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        target: bool,
    ) -> Any:
        process = self._process
        self.began += 1
        if process.dead:
            raise ProcessDead(f"process {process.number} is dead ({name})")
        now = self._server_time()
        now = self._world.clock.now() if now is None else now
        self._injector.times_ahead += times_check.ahead(name, args, kwargs, now)
        self.inflight += 1
        self.calls_in_flight[name] += 1
        try:
            await process.wait_unfrozen()
            if process.dead:
                raise ProcessDead(f"process {process.number} is dead ({name})")
            kind = self._injector.take(name) if target else None
            if self._client and kind is not None:
                kind = _CLIENT_FAULTS.get(kind, kind)
            if kind == "error_before":
                raise InjectedDbError(f"injected: {name} failed before reaching the database")
            if kind == "crash_before":
                process.dead = True
                raise ProcessDead(f"process {process.number} crashed before {name}")
            if kind == "stall" and not process.closing:
                # The driver freezes one process at a time, the one it is asked to: a stall
                # while another process's is still to be carried out does nothing (it once
                # overwrote that request and left the other process frozen for good, while
                # the driver, which never froze it, thought it ran).
                requested = self._injector.stall_requested
                if process.stalled is None and requested in (None, process):
                    self._injector.stall_requested = process
                    process.stalled = asyncio.Event()
                await process.wait_unfrozen()
            begun = self._world.tick() if name in purging.ENDS else -1
            result = await self._gated(name, method, args, kwargs)
            if _TRACE:
                _trace(process.number, name, args, kwargs, result, kind, now)
            self._observe(name, args, kwargs, result)
            self._ended(name, args, kwargs, result, begun)
            if kind == "lost_ack":
                raise InjectedDbError(f"injected: {name} committed, its acknowledgement was lost")
            if kind == "crash_after":
                process.dead = True
                raise ProcessDead(f"process {process.number} crashed after {name}")
            if kind == "restart_after":
                self._injector.restart_requested = process
            if process.dead:
                # It died while the call was in flight: the caller never hears back.
                raise ProcessDead(f"process {process.number} died during {name}")
            return result
        finally:
            self.inflight -= 1
            self.calls_in_flight[name] -= 1

    async def _gated(
        self, name: str, method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """``method(...)``; with purges on, a purge apart from the writes that can end a run
        (``purging.Gate``: the observer remembers what a purge deletes)."""
        gate = self._world.purge_gate
        if gate is None:
            return await method(*args, **kwargs)
        if name == "purge_ended":
            async with gate.purging():
                purged = await method(*args, **kwargs)
                gate.counts.update(purge_calls=1, purged_runs=len(purged))
                gate.purged.update(purged)
                return purged
        if name in purging.ENDS:
            async with gate.ending():
                if self._process.dead:  # it died while the purge held it back
                    raise ProcessDead(f"process {self._process.number} is dead ({name})")
                return await method(*args, **kwargs)
        return await method(*args, **kwargs)

    def _ended(
        self, name: str, args: tuple[Any, ...], kw: dict[str, Any], result: Any, begun: int
    ) -> None:
        """When the claims and ends of runs happened, for the per-key order check: the seq
        of a claim's return, and of the start of the call that ended a run."""
        world = self._world
        if name == "claim_due":
            for record, _ in result:
                world.claimed.setdefault(record.run_id, world.tick())
        elif name == "finish_workflow" or (name == "end_workflow" and result):
            world.ending.setdefault(args[0] if args else kw["run_id"], begun)
        elif name == "create_workflow" and result.replaced_run_id is not None:
            world.ending.setdefault(result.replaced_run_id, begun)

    def _observe(self, name: str, args: tuple[Any, ...], kw: dict[str, Any], result: Any) -> None:
        world = self._world
        steps = []
        if name == "record_step":
            steps.append(args[0] if args else kw["step"])
        elif name in ("finish_workflow", "wait_workflow"):
            key = "final_step" if name == "finish_workflow" else "step"
            if kw.get(key) is not None:
                steps.append(kw[key])
        for step in steps:
            if step.status is StepStatus.COMPLETED and step.kind in (
                StepKind.ACTIVITY,
                StepKind.COMPENSATION,
            ):
                world.committed(step.run_id, step.call_id)
        if name == "create_workflow":
            new = args[0] if args else kw["new"]
            if result.created:
                # Below the Manager's codec: the arguments may be sealed (settings.codec).
                places = _places.args_places(new.run_id, new.name, new.debounce_key)
                program = json.loads(_opened(new.args, places[:1]))["program"]["label"]
                world.created(new.run_id, new.key, new.parent_key, program)
                if result.replaced_run_id is not None:
                    world.replaced[result.replaced_run_id] = new.run_id
        elif name == "fork_workflow" and result is not None and result.created:
            new = result.record
            places = _places.args_places(new.run_id, new.name, new.debounce_key)
            program = json.loads(_opened(new.args, places))["program"]["label"]
            world.created(new.run_id, new.key, None, program)
        elif name == "end_workflow" and result:
            world.ended_by_request[args[0] if args else kw["run_id"]] = kw["status"].value
        elif name == "request_cancel" and result:
            world.cancel_requested.add(args[0] if args else kw["run_id"])
        if name == "claim_due":
            self._process.owner = kw["owner"]
        elif name == "create_workflow" and kw.get("lease") is not None:
            self._process.owner = kw["lease"].owner


_TRACE = os.environ.get("SAGAWAY_GEN_TRACE", "")


def _trace(
    number: int,
    name: str,
    args: tuple[Any, ...],
    kw: dict[str, Any],
    result: Any,
    kind: str | None,
    now: float,
) -> None:
    """One line per store call that returned (``SAGAWAY_GEN_TRACE=<file>``), for reading a
    failure's timeline."""
    parts = [repr(a)[:300] for a in args] + [f"{k}={v!r}"[:300] for k, v in kw.items()]
    with open(_TRACE, "a") as out:
        out.write(f"t={now:.3f} p{number} {name}({', '.join(parts)}) -> {result!r}"[:1500])
        out.write(f" [{kind}]\n" if kind else "\n")


def _opened(args: str, places: tuple[_places.Place, ...]) -> str:
    """Arguments as written by the engine's codec, opened (plain JSON is returned as it is):
    sealed for the first of ``places`` that opens them. A new start seals for the first place
    of ``_places.args_places`` (a debounced start for its burst, which the start may join,
    any other for its run); a fork's copy may carry either (a burst's run's, re-sealed)."""
    from sagaway.errors import PayloadError
    from tests.generative.driver import CODEC

    for place in places[:-1]:
        try:
            return CODEC.open(args, place=place)
        except PayloadError:
            continue
    return CODEC.open(args, place=places[-1])
