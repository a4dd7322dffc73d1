"""The world outside the engine: what activities did, and the workflow that interprets programs.

Activities and the interpreter are registered on every Manager ("process") of a scenario; they
close over that process, so a dead process runs no effects. The World records every activity
execution (with its idempotency key and the order of events), every committed step the store
acknowledged, and every execution the store created; the invariants are checked on that record.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import sagaway as sw
from tests.generative.program import (
    RETRY_ATTEMPTS,
    Act,
    Child,
    Gather,
    Node,
    Patch,
    Program,
    Publish,
    Receive,
    Sleep,
    from_json,
)

if TYPE_CHECKING:
    from sagaway.testing import FakeClock
    from tests.generative.purging import Gate
    from tests.generative.queues import Plan

T = TypeVar("T")

QUEUE = "gen-q"
"""The cluster-wide activity queue's name (``queues.py``)."""

# The form of the keys the engine derives, ``<key space>/<call id>`` (a key space holds no
# ``/``; a call id is call numbers, counted from 1, joined by ``/``): a child key chosen in
# that form must be refused.
DERIVED_FORM = re.compile(r"[^/]+/[1-9][0-9]*(?:/[1-9][0-9]*)*")


class ChosenKeyAccepted(AssertionError):
    """The engine started a child under a chosen key of the derived form."""


class ProcessDead(Exception):
    """The simulated process has crashed: nothing it does reaches the database or the world."""


class InjectedDbError(Exception):
    """A database error injected at the Store boundary (before or after the call committed)."""


class ActivityFailure(Exception):
    """An incompletable failure of an activity (any exception that is not a sagaway error)."""


@dataclasses.dataclass
class Execution:
    seq: int
    """When it began: for a sync attempt, when the engine handed it to its thread pool."""
    process: int
    run_id: str
    call_id: str
    label: str
    key: str
    attempt: int
    compensation: bool
    outcome: str = "running"
    """running, ok (the effect happened), error, dead."""
    end_seq: int = -1


@dataclasses.dataclass
class RunInfo:
    run_id: str
    key: str
    parent_key: str | None
    program: str
    """Label of the program it runs."""
    seq: int


class World:
    """Everything that happened outside the engine's own state, in one order (``seq``)."""

    def __init__(self, clock: FakeClock, acts: dict[str, Act]) -> None:
        self.clock = clock
        self.acts = acts
        self._seq = itertools.count()
        self.executions: list[Execution] = []
        self.attempts: dict[tuple[str, str, bool], int] = {}
        self.executing: dict[str, int] = {}
        """Activities running now, by run id."""
        self.sync_running = 0
        """Sync activity attempts handed to a thread pool and not done (see ``handover``)."""
        self._sync_lock = threading.Lock()
        self._handed = threading.local()
        """In a pool thread: the ``seq`` at which the attempt it runs was handed over."""
        self.interpreting: dict[tuple[int, str], int] = {}
        """(process number, program label) -> workflow functions running it there now."""
        self.chosen_keys: set[str] = set()
        """Child keys a program chose (shared by every run of its parent's key)."""
        self.commits: dict[tuple[str, str], int] = {}
        """(run id, call id) -> seq at which the store acknowledged its COMPLETED outcome."""
        self.runs: dict[str, RunInfo] = {}
        self.replaced: dict[str, str] = {}
        """run id -> the run that replaced it (TERMINATE_EXISTING)."""
        self.ended_by_request: dict[str, str] = {}
        """run id -> CANCELLED/TERMINATED, when end_workflow said it changed the run."""
        self.cancel_requested: set[str] = set()
        """Runs a cancel request reached while live (request_cancel said so)."""
        self.claimed: dict[str, int] = {}
        """run id -> seq when a claim that took it first returned (``flows.check``)."""
        self.ending: dict[str, int] = {}
        """run id -> seq when the store call that ended it began (``flows.check``)."""
        self.lease_losses: list[int] = []
        """seqs at which running attempts may have lost their queue slots: a process froze or
        died, or the clock passed a lease in one step (``queues.over_concurrency``)."""
        self.purge_gate: Gate | None = None
        """With purges on: keeps each purge apart from the writes that can end a run, and
        has the observer remember what it deletes (``purging.Gate``)."""

    def tick(self) -> int:
        return next(self._seq)

    def busy(self) -> bool:
        return self.sync_running > 0

    # ------------------------------------------------------------------ sync hand-overs

    def handed_over(self) -> int:
        """An engine handed a sync attempt to its thread pool: it runs from now on."""
        with self._sync_lock:
            self.sync_running += 1
        return self.tick()

    def handover_done(self) -> None:
        with self._sync_lock:
            self.sync_running -= 1

    def run_handed(self, seq: int, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run a handed-over attempt in its pool thread; ``begin`` records it at ``seq``."""
        self._handed.seq = seq
        try:
            return fn(*args, **kwargs)
        finally:
            self._handed.seq = None

    # ------------------------------------------------------------------ activities

    def begin(self, process: Process, label: str) -> Execution:
        if process.dead:
            raise ProcessDead(f"process {process.number} is dead")
        info = sw.activity_info()
        slot = (info.run_id, label, info.is_compensation)
        attempt = self.attempts[slot] = self.attempts.get(slot, 0) + 1
        # A sync attempt began when it was handed to the pool, not when its thread started.
        handed: int | None = getattr(self._handed, "seq", None)
        execution = Execution(
            self.tick() if handed is None else handed,
            process.number,
            info.run_id,
            info.call_id,
            label,
            info.idempotency_key,
            attempt,
            info.is_compensation,
        )
        self.executions.append(execution)
        self.executing[info.run_id] = self.executing.get(info.run_id, 0) + 1
        return execution

    def end(self, process: Process, execution: Execution, outcome: str) -> None:
        self.executing[execution.run_id] -= 1
        execution.outcome = "dead" if process.dead else outcome
        execution.end_seq = self.tick()

    def behave(self, execution: Execution) -> str:
        """Raise what the activity's spec says for this attempt, or return its value."""
        act = self.acts[execution.label]
        n = execution.attempt
        if execution.compensation:
            if act.compensate == "fail_once" and n == 1:
                raise sw.RetryableError(f"undo {execution.label} failed once")
            return f"undone:{execution.label}"
        kind = act.kind
        if kind == "completable":
            raise sw.CompletableError(execution.label, code=execution.label)
        if kind == "retry_ok" and n <= act.fails:
            raise sw.RetryableError(f"{execution.label} busy")
        if kind == "retry_exhaust":
            raise sw.RetryableError(f"{execution.label} always busy")
        if (kind == "fail_once" and n == 1) or kind == "fail_always":
            raise ActivityFailure(f"{execution.label} broke")
        if kind == "base_once" and n == 1:
            if act.sync:
                raise SystemExit(f"{execution.label} called sys.exit")
            raise asyncio.CancelledError(f"{execution.label} leaked a CancelledError")
        return execution.label

    # ------------------------------------------------------------------ store observations

    def committed(self, run_id: str, call_id: str) -> None:
        self.commits.setdefault((run_id, call_id), self.tick())

    def created(self, run_id: str, key: str, parent_key: str | None, program: str) -> None:
        if run_id not in self.runs:
            self.runs[run_id] = RunInfo(run_id, key, parent_key, program, self.tick())


@dataclasses.dataclass(eq=False)
class Process:
    """One simulated worker process: a Manager and the liveness of everything it runs."""

    number: int
    dead: bool = False
    stalled: asyncio.Event | None = None
    """Set while the process runs; cleared while it is frozen (see the stall fault)."""
    closing: bool = False
    """Its Manager is closing (the driver waits for that: a stall would hang it)."""
    owner: str | None = None
    """The engine's lease owner name, learnt from its claims."""
    offset: float = 0.0
    """The engine's clock minus the FakeClock (PostgreSQL: the server's clock is used)."""
    version: str | None = None
    """Its code version (``settings.code_versions``): its worker runs only that version."""

    async def wait_unfrozen(self) -> None:
        if self.stalled is not None:
            await self.stalled.wait()


RETRY = sw.RetryPolicy(initial_interval=1.0, backoff_coefficient=2.0, maximum_attempts=3)
assert RETRY.maximum_attempts == RETRY_ATTEMPTS


def install(manager: sw.Manager, world: World, process: Process, plan: Plan) -> None:
    """Register the activities and the program interpreter on ``manager``; with a queue
    (``queues.py``), the activities once more on it."""

    async def act_async(label: str) -> str:
        # Begun before a freeze takes effect: the engine had decided to run it, and a pause
        # can always come between that decision and the effect (at-least-once).
        execution = world.begin(process, label)
        try:
            await process.wait_unfrozen()
            act = world.acts[label]
            if not execution.compensation and act.kind == "hang":
                await asyncio.Event().wait()  # never returns: its deadline cancels it here
            if act.cancels and not execution.compensation and execution.attempt == 1:
                # Accepted (or not) while its last step runs: the driver reads which.
                with contextlib.suppress(Exception):
                    await manager.cancel(sw.activity_info().workflow_key, "during its last step")
                await process.wait_unfrozen()
            delay = act.delay
            if delay and not execution.compensation:
                await world.clock.sleep(delay)
                await process.wait_unfrozen()
                if process.dead:
                    raise ProcessDead(f"process {process.number} died during {label}")
            value = world.behave(execution)
        except BaseException:
            world.end(process, execution, "error")
            raise
        world.end(process, execution, "ok")
        return value

    def act_sync(label: str) -> str:
        # Counted as running, and begun, from its hand-over to the pool (``handover``).
        execution = world.begin(process, label)
        try:
            value = world.behave(execution)
        except BaseException:
            world.end(process, execution, "error")
            raise
        world.end(process, execution, "ok")
        return value

    fns = {
        (False, False): manager.register_activity(name="act_async", retry=RETRY)(act_async),
        (True, False): manager.register_activity(name="act_sync", retry=RETRY)(act_sync),
    }
    if plan.concurrency is not None:
        on_queue = manager.register_activity(
            queue=QUEUE, priority=plan.activity_priority, retry=RETRY, name="act_async_q"
        )
        on_queue_sync = manager.register_activity(
            queue=QUEUE, priority=plan.activity_priority, retry=RETRY, name="act_sync_q"
        )

        async def act_async_q(label: str) -> str:
            return await act_async(label)

        def act_sync_q(label: str) -> str:
            return act_sync(label)

        fns[False, True] = on_queue(act_async_q)
        fns[True, True] = on_queue_sync(act_sync_q)

    @manager.register_workflow(name="interp", priority=plan.workflow_priority)
    async def interp(program: dict[str, Any], own_key: str | None = None) -> list[Any]:
        prog: Program = from_json(program)
        where = (process.number, prog.label)
        world.interpreting[where] = world.interpreting.get(where, 0) + 1
        try:
            interpreter = Interpreter(manager, own_key, fns, plan, interp)
            interpreter.chosen_keys = world.chosen_keys
            return await interpreter.run(prog)
        finally:
            world.interpreting[where] -= 1


def _node_number(label: str) -> int:
    """The number of a child node from its label (``w0.c4`` -> 4): unique in its program."""
    match = re.search(r"[a-z]+([0-9]+)$", label)
    assert match is not None, f"a child node label ends in its number: {label!r}"
    return int(match.group(1))


class Interpreter:
    """Runs a program's nodes as durable calls (one instance per workflow run)."""

    def __init__(
        self,
        manager: sw.Manager,
        own_key: str | None,
        fns: dict[tuple[bool, bool], Any],
        plan: Plan,
        wf: Any,
    ) -> None:
        self.manager = manager
        self.own_key = own_key
        self.fns = fns
        """(sync, on the queue) -> the activity."""
        self.plan = plan
        self.wf = wf
        self.saga: sw.Saga | None = None
        self.chosen_keys: set[str] = set()
        """Where to note the keys this program chose for its children."""

    async def run(self, program: Program) -> list[Any]:
        out: list[Any] = []
        if program.saga == "none":
            await self.body(program.body, out)
        elif program.saga == "with":
            async with sw.Saga() as saga:
                self.saga = saga
                await self.body(program.body, out)
        else:
            self.saga = sw.Saga()
            try:
                await self.body(program.body, out)
            except (sw.CompletableError, sw.WorkflowCancelled, sw.Cancelled):
                await self.saga.execute()  # a cancellation (its own, its child's) too
                raise
        return out

    async def body(self, nodes: tuple[Node, ...], out: list[Any]) -> None:
        for node in nodes:
            await self.node(node, out)

    async def node(self, node: Node, out: list[Any]) -> None:
        manager = self.manager
        if isinstance(node, Act):
            fn = self.fns[node.sync, node.label in self.plan.queued]
            priority = self.plan.call_priority.get(node.label)
            try:
                value = await manager.activity(fn, node.label).execute_get(priority=priority)
            except Exception:
                if not node.catch:
                    raise
                value = f"caught:{node.label}"
            else:
                if self.saga is not None and node.compensate != "none":
                    self.saga.add_compensation(fn, node.label)
            out.append(value)
        elif isinstance(node, Gather):
            outs: list[list[Any]] = [[] for _ in node.branches]
            results = await asyncio.gather(
                *(self.body(b, o) for b, o in zip(node.branches, outs, strict=True)),
                return_exceptions=True,
            )
            # Every branch has finished: raise the engine's own signals first, then the first
            # branch's error in branch order, so the outcome does not depend on timing.
            for r in results:
                if isinstance(r, BaseException) and not isinstance(r, Exception):
                    raise r
            for r in results:
                if isinstance(r, BaseException):
                    raise r
            for o in outs:
                out.extend(o)
        elif isinstance(node, Child):
            await self.child(node, out)
        elif isinstance(node, Receive):
            try:
                if node.update:
                    value = await manager.update(node.label).handle(
                        _answer, validator=_refuse_bad, timeout=node.timeout
                    )
                else:
                    value = await manager.signal(node.label).receive(str, timeout=node.timeout)
            except sw.SignalTimeout:
                value = f"timeout:{node.label}"
            out.append(value)
        elif isinstance(node, Sleep):
            await manager.sleep(node.seconds)
        elif isinstance(node, Patch):
            out.append(f"patched:{node.label}" if sw.patched(node.label) else f"old:{node.label}")
        elif isinstance(node, Publish):
            await sw.write_stream("progress", node.label)
            out.append(f"published:{node.label}")

    async def expect_refused(self, key: str, node: Child) -> None:
        """A chosen key that could equal a derived one: the start must raise ValueError."""
        from tests.generative.program import to_json

        call = self.manager.workflow(self.wf, to_json(node.program), key)
        try:
            await call.execute(idempotency_key=key)
        except ValueError:
            return
        raise ChosenKeyAccepted(f"the chosen child key {key!r} has the derived form")

    async def child(self, node: Child, out: list[Any]) -> None:
        from tests.generative.program import shared_key, to_json

        key: str | None = None
        if node.key == "user":
            key = f"child-{node.label}"
        elif node.key == "slash" and self.own_key is not None:
            # Numbered by the node's place in the program, not by the order the calls came in:
            # gather branches reach their children in another order on replay (a counter
            # once gave two children one key after a restart, which is the program's bug).
            key = f"{self.own_key}/{_node_number(node.label)}"
            if DERIVED_FORM.fullmatch(key):
                await self.expect_refused(key, node)
                key += "-kid"
        elif node.key == "shared":
            key = shared_key(node.program)
        if key is not None:
            self.chosen_keys.add(key)
        call = self.manager.workflow(self.wf, to_json(node.program), key)
        if node.mode == "get":
            out.append(await call.execute_get(idempotency_key=key))
            return
        handle = await call.execute(idempotency_key=key)
        if node.mode == "start":
            out.append(f"started:{node.label}")
            return
        out.append(await handle.result())


def _answer(payload: str) -> str:
    """An update handler: the payload is the answer (the model's ``sig:<label>``)."""
    return payload


def _refuse_bad(payload: str) -> None:
    """An update validator: refuses the requests the client sends to be refused."""
    if payload.startswith("bad:"):
        raise ValueError(f"refused {payload}")
