"""What the generator may build and which faults it may inject: one switch per building block.

A switch is off by default only when a known, open engine defect (or a feature not built yet)
makes every program that uses it fail; the reason is written next to it. Turn one on
(``--gen-enable=NAME,...`` or the ``SAGAWAY_GEN_ENABLE`` environment variable) when its fix
lands, and flip its default once the generative run passes with it. ``--gen-enable=all`` turns
everything on.
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
    patches: bool = True
    streams: bool = True
    """``sw.write_stream`` steps; the checks read every run's stream (each item once)."""
    codec: bool = True
    """Every process's Manager seals what it stores (``codec=[Compress(), Encrypt(...)]``); the
    checks read the database through the same codec."""
    """``sw.patched(...)`` points (one code version: the new path; its marker must replay)."""

    # Each switch below was off while the defect named with it was open (the reproduction is
    # in test_found_defects.py or tests/integration/test_composition.py); all are fixed now.
    compensated_gather: bool = True
    """Compensations added inside ``asyncio.gather`` branches (after a
    restart the compensations ran in another order than the steps completed)."""
    user_child_keys: bool = True
    """Child keys chosen by the workflow, including ``<own key>/<n>`` (activity keys
    of the child and of the parent's branches collided; ``<own key>/<n>`` could equal the
    key the engine derives for another child: such keys are now refused, and the interpreter
    checks the refusal, see
    ``test_composition.py::test_a_chosen_child_key_of_the_derived_form_is_refused``)."""
    branches_opening_with_gather: bool = True
    """Gather branches whose first step is an inner gather (found by this test: such a branch
    was numbered by timing, and a replay handed a call another call's recorded result)."""
    business_errors_in_gather: bool = True
    """Completable errors inside gather branches (without ``except``: a store error
    raised into one branch was dropped for another branch's business error)."""
    children_beside_gather: bool = True
    """A workflow that both starts children and gathers branches (with the engine's
    default child keys)."""
    terminate_restart: bool = True
    """``OnConflict.TERMINATE_EXISTING`` on a live workflow (the new run reused the old
    run's activity keys)."""
    slow_activities: bool = True
    """Async activities that take (virtual) time, gathered beside child waits (parents
    waiting for children held every worker slot)."""
    waits_beside_activities: bool = True
    """Gather branches that wait (a timer of 1 s or more, a signal, a child's result) beside
    branches that run activities (a child form, and a timer form found by this test: the wait kept
    the workflow in the worker after the activity ended)."""
    base_exceptions: bool = True
    """``SystemExit`` from a sync activity, ``asyncio.CancelledError`` from an async one
    (the first ended the event loop, the second re-ran the activity forever)."""
    catch_all: bool = True
    """Workflow code wrapping an activity in ``try/except Exception`` (an engine error
    reached workflow code, which completed on its fallback)."""
    cancel_child: bool = True
    """Cancel a child the parent waits for (the parent was stranded SUSPENDED)."""
    shared_child_keys: bool = True
    """Two top-level workflows wait for one child under a key both chose: one creates it, the
    other attaches (its end woke only the creator; cancelling the one that attached cancelled
    the child)."""
    cancel_compensates: bool = True
    """Check that a cancelled workflow ran the compensations of every step it completed
    (cancellation is cooperative and compensates)."""
    timed_waits_early: bool = True
    """A signal receive with a day's timeout whose signal the client sends once the workflow
    waits, long before the timeout (the receive was recorded as ending at its deadline, and
    every step after it; ``clock_times_check`` sees it)."""
    cancel_last_step: bool = True
    """The last step of a top-level program asks, while it runs (its first attempt), for its
    own workflow's cancellation: no durable call follows, so the end of its saga block or of
    the workflow must deliver it (the request was accepted, then dropped: the run COMPLETED)."""
    ordered_starts: bool = True
    """Two top-level workflows in three started with an ``ordering_key`` of their own (a line
    of one: created PENDING, its start goes through the claim's per-key order check, a restart
    with TERMINATE_EXISTING takes the line again)."""
    debounced_starts: bool = True
    """One top-level workflow in three started as a debounced burst: one or two starts with a
    decoy program, then the real one, each under its own idempotency key; the burst must be one
    run given the last start's arguments (``flows.py``)."""
    shared_lines: bool = True
    """In half the scenarios with two top-level workflows (no deadline), both share one
    ``ordering_key``: they run one at a time in start order, a restart joins the end of the
    line, a run waits PENDING while one ahead of it has not ended (``flows.py``)."""
    prioritised_starts: bool = True
    """One top-level workflow in two started (and restarted) with a priority from 1 to 5 and one
    of two fairness tenants, drawn from its program (``flows.py``): it must run as any run, and
    record what its start asked for."""
    activity_queue: bool = True
    """In half the scenarios every process declares one cluster-wide activity queue
    (``sw.Queue(concurrency=1 or 2, scope="cluster")``) and about half of the programs'
    activities (and their compensations) are called through it (``queues.py``): nothing runs
    past its concurrency across the processes, no call is lost in its line, every run ends as
    the model says."""
    activity_priority: bool = True
    """A third of the queued activities are called with ``execute_get(priority=N)``
    (``queues.py``)."""
    registered_priorities: bool = True
    """``register_activity(..., priority=N)`` for the queue's activities in half the queue
    scenarios, ``register_workflow(..., priority=N)`` for the interpreter in half of all: a
    top-level start without a priority records the registered one (``queues.py``)."""
    deadline_hang: bool = True
    """A top-level workflow started with a deadline (``execute(deadline=)``) whose last step is
    an async activity that never returns: cancelled in its task past the deadline and its
    grace, the run ends CANCELLED after its compensations (it stayed RUNNING forever)."""
    cancel_never_lost: bool = True
    """Check that a run a cancel request reached while live (the request was accepted) ends
    CANCELLED, or FAILED if a business error was already being compensated: never COMPLETED
    (off: the check before cancels were delivered at the ends of sagas and workflows)."""
    updates: bool = True
    """Some signal receives of top-level programs are update handlers
    (``manager.update(label).handle(fn, validator=...)``): the client sends a request the
    validator refuses, then the good one (with a dedupe, twice), without waiting for the
    answer; the checks ask again for it (``talking.py``)."""
    pauses: bool = True
    """The client pauses some top-level workflows after the first settle (WAITING or
    SUSPENDED then), sends their signals, lets the processes go idle, checks that nothing of
    the paused run began, and resumes them (``talking.py``)."""
    telemetry: bool = True
    """An observer receives the engine's telemetry (spans, attempt and end reports) and its
    reports are checked against what happened (``telemetry_check.py``)."""
    schedules: bool = True
    """A program run by a schedule (a tick every 10 minutes, catch-up ``all``) beside the
    top-level workflows, paused after the first settle: every process runs a scheduler, each
    tick up to the last one started has one execution, each ends as the model says
    (``fleet.py``)."""
    code_versions: bool = True
    """Two code versions in one fleet: a process of each (``Manager(version=V,
    run_versions={V})``, a crashed one replaced by one of its version), the top-level
    workflows started by both; every execution records the version of the process that created
    it (a child its parent's) and runs only on processes of that version (``fleet.py``)."""
    purge: bool = True
    """Every process runs background retention with a tiny age (``purging.py``): ended runs
    vanish while others may still read them (a workflow that attached to a shared child used
    to lose it, and stayed SUSPENDED with WorkflowNotFound). It was off while a harness failure
    was open: the harness lost a run whose end committed between the observer's look and the
    purge (``purging.Gate`` now keeps the two apart)."""
    fork: bool = True
    """The client forks some ended top-level runs from one of their steps, under the fault
    plan (``forks.py``): the fork's run ends as the model says without executing a kept step
    again, its new steps run under keys the source never used, and a refused fork
    (``ForkRefused`` for dropped compensations, ``WorkflowNotEnded``) creates nothing."""

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

    clock_times_check: bool = True
    """No store call records a time ahead of the database's clock: a step's start and end (not
    a waiting receive's deadline, nor a sleep's wake-up time), a signal's delivery, its ``now``
    (``times_check.py``)."""

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
