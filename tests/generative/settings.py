"""What the generator may build and which faults it may inject: one switch per building block.

A switch is off by default only when a known, open engine defect makes every program that uses
it fail; the reason is written next to it. Turn one on (``--gen-enable=NAME,...`` or the
``SAGAWAY_GEN_ENABLE`` environment variable) when its fix lands, and flip its default once the
generative run passes with it. ``--gen-enable=all`` turns everything on (expect failures).
"""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass(frozen=True, kw_only=True)
class GenSettings:
    """Building blocks, fault kinds and checks of one generative run."""

    # ------------------------------------------------------------------ building blocks
    sync_activities: bool = True
    async_activities: bool = True
    gather: bool = True
    nested_gather: bool = True
    saga_with: bool = True
    """``async with sw.Saga() as saga:``."""
    saga_explicit: bool = True
    """``try: ... except CompletableError: await saga.execute(); raise``."""
    children_get: bool = True
    """Child workflows whose result the parent waits for (``execute_get`` / ``handle.result``)."""
    children_start: bool = True
    """Fire-and-forget child workflows (``execute``)."""
    signals: bool = True
    signal_dedupe: bool = True
    """The same signal sent twice with one ``dedupe_id``."""
    timers: bool = True
    completable_errors: bool = True
    retryable_errors: bool = True
    incompletable_errors: bool = True
    """Other exceptions: the workflow is SUSPENDED, then (for a one-off failure) recovered."""
    failing_compensations: bool = True
    """A compensation that fails once and is retried."""
    cancel: bool = True
    """``handle.cancel()`` of a top-level workflow at a random point."""

    compensated_gather: bool = False
    """Compensations added inside ``asyncio.gather`` branches. Off: issue 12 defect 1 (after a
    restart the branches' recorded calls return in start order, so the compensations run in
    another order than the steps completed; with one activity for every undo, a compensation is
    skipped and another runs twice)."""
    user_child_keys: bool = False
    """Child keys chosen by the workflow, including ``<own key>/<n>``. Off: defect 2 (keys of
    activities in the child and in the parent's branches collide)."""
    branches_opening_with_gather: bool = False
    """Gather branches whose first step is an inner gather. Off: found by this test
    (test_found_defects.py::test_replayed_branches_get_their_own_recorded_results): such a
    branch is numbered at its first own durable call, after the inner gather, in an order set
    by timing; replay numbers it otherwise and hands a call another call's recorded result."""
    business_errors_in_gather: bool = False
    """Completable errors inside gather branches. Off, with database faults on: defect 12 in
    another shape (no ``except`` in workflow code): a store error raised into one branch (a
    retry's RETRYING record failed) is dropped when another branch's business error is the
    one raised, and the workflow ends FAILED instead of resuming."""
    children_beside_gather: bool = False
    """A workflow that both starts children and gathers branches. Off: defect 2 again, with
    the engine's default child keys: the child started by call ``n`` has key ``<key>/<n>``, so
    its activity ``m`` has key ``<key>/<n>/<m>``, the key of the parent's activity ``m`` in
    gather branch ``n``."""
    terminate_restart: bool = False
    """``OnConflict.TERMINATE_EXISTING`` on a live workflow. Off: defect 3 (the new run reuses the
    old run's activity keys)."""
    slow_activities: bool = False
    """Async activities that take (virtual) time, gathered beside child waits. Off: defect 4
    (a parent waiting for a child in a branch holds its worker slot; with every slot held the
    children never run)."""
    waits_beside_activities: bool = False
    """Gather branches that wait (a timer of 1 s or more, a signal, a child's result) beside
    branches that run activities. Off: such a wait, begun while another branch's activity runs,
    is done inside the worker and keeps its slot after that activity ends: for a child's result
    until the child ends (defect 4, the deadlock), for a timer until it fires (found by this
    test: test_found_defects.py::test_gather_timer_beside_activity_holds_worker_slot), for a
    signal until the next poll."""
    base_exceptions: bool = False
    """``SystemExit`` from a sync activity, ``asyncio.CancelledError`` from an async one.
    Off: defect 5 (the first kills the test's event loop, the second re-runs the activity
    forever)."""
    catch_all: bool = False
    """Workflow code wrapping an activity in ``try/except Exception``. Off with database faults:
    defect 12 (an engine error reaches workflow code, which completes on its fallback)."""
    cancel_child: bool = False
    """Cancel a child the parent waits for. Off: defect 7 (the parent is stranded SUSPENDED)."""
    cancel_compensates: bool = False
    """Check that a cancelled workflow ran its compensations (DESIGN, contract additions:
    cancellation is cooperative and compensates). Off: ``handle.cancel()`` ends the workflow
    where it stands, without compensating."""

    # ------------------------------------------------------------------ faults
    crash: bool = True
    """Hard process restart at a store call: from then on every call fails, nothing is
    released; a new Manager opens on the database and the clock passes the lease timeout."""
    graceful_restart: bool = True
    """Close the Manager after a store call (leases released) and open a new one."""
    db_errors: bool = True
    """A store call raises before reaching the database."""
    lost_acks: bool = True
    """A store call commits, then raises (the acknowledgement was lost)."""
    delayed_wakeups: bool = True
    """The clock jumps past due times (timers, backoffs, heartbeats fire late)."""
    lease_steal: bool = True
    """A second process on the same database; the first stalls in a store call while the clock
    passes its lease, the second takes its work over, then the first resumes."""

    # ------------------------------------------------------------------ checks
    idle_slot_check: bool = True
    """When nothing can happen until the clock moves, no workflow may hold a worker (RUNNING)
    unless one of its activities runs or a retry backoff of it is pending."""

    def enabled(self, **overrides: bool) -> GenSettings:
        return dataclasses.replace(self, **overrides)


FLAGS = tuple(f.name for f in dataclasses.fields(GenSettings))


def from_names(names: str) -> GenSettings:
    """Defaults, with the comma-separated switches in ``names`` turned on (``all``: every one;
    ``-name`` turns one off)."""
    base = GenSettings()
    overrides: dict[str, bool] = {}
    for raw in (n.strip() for n in names.split(",")):
        if not raw:
            continue
        if raw == "all":
            overrides.update(dict.fromkeys(FLAGS, True))
            continue
        value = not raw.startswith("-")
        name = raw.lstrip("-+")
        if name not in FLAGS:
            raise ValueError(f"unknown generator switch {name!r}; known: {', '.join(FLAGS)}")
        overrides[name] = value
    return dataclasses.replace(base, **overrides)


def from_environment(option: str | None) -> GenSettings:
    return from_names(",".join(x for x in (os.environ.get("SAGAWAY_GEN_ENABLE"), option) if x))
