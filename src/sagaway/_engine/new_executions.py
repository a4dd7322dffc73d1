"""New executions: the one place an execution to create is built, and its creation reported.

Every entry point creates executions through ``build`` and reports the ones it created with
``started``: a client's start or a child's (``Engine.start``), a schedule's tick or trigger
(``schedules``), and an Engine Server's ``StartWorkflow`` (``server.starts``). So each
execution records the same things whoever creates it: the code version of the process that
creates it (a worker given ``run_versions`` claims it by that), a trace context, its key space,
its queue, its deadline and per-key limit; and each is counted once in the ``started`` metric
and announced on the creating process's Channel.
"""

from __future__ import annotations

from sagaway import errors, events, observe, serialization
from sagaway._engine import flow_control, keys, versions
from sagaway._engine.flow import PLAIN, Flow
from sagaway._engine.flow_control import FlowOptions
from sagaway._engine.options import check_deadline
from sagaway._engine.text_checks import check_key
from sagaway.channel import Channel
from sagaway.randomness import new_run_id
from sagaway.states import OnConflict
from sagaway.store.records import NewWorkflow, WorkflowRecord


def build(
    *,
    name: str,
    args_json: str,
    key: str,
    queue: str,
    code_version: str | None,
    parent_key: str | None = None,
    replacing: bool = False,
    deadline: float | None = None,
    trace_context: str | None = None,
    concurrency_key: str | None = None,
    max_per_key: int = 1,
    flow: Flow = PLAIN,
    keyed: FlowOptions | None = None,
) -> NewWorkflow:
    """An execution of workflow ``name`` to create under ``key`` (checked already).

    ``code_version``: the creating process's (``Manager(version=...)``; for an Engine Server,
    the caller's). ``replacing``: it may replace a live execution under ``key`` (its key space
    is then its own run's). ``trace_context``: the caller's; None: a new one from the installed
    tracer, if any. ``concurrency_key``: created under a per-key limit of ``max_per_key``.
    ``deadline``: seconds from its start until it is cancelled as by a request.
    ``flow``: its priority and fairness key and weight (checked by ``flow.of_start``).
    ``keyed``: its per-key order and debounce (``flow_control``)."""
    check_deadline(deadline)
    keyed = keyed or flow_control.UNKEYED
    if keyed is not flow_control.UNKEYED:  # none of them given: nothing to check
        flow_control.check_keyed(keyed)
    if code_version is not None:
        versions.check_code_version(code_version, "code_version")
    if concurrency_key is not None:
        check_key(concurrency_key, "concurrency_key")
        if max_per_key < 1:
            raise ValueError(f"max_per_key must be >= 1, not {max_per_key}")
    if trace_context is None and observe.observers:
        trace_context = observe.trace_context(name, key)
    run_id = new_run_id()
    return NewWorkflow(
        run_id=run_id,
        key=key,
        name=name,
        args=args_json,
        args_hash=serialization.args_hash(args_json),
        parent_key=parent_key,
        queue=queue,
        key_space=keys.key_space(key, run_id, replacing=replacing),
        timeout=deadline,  # the record's name for it
        trace_context=trace_context,
        code_version=code_version,
        concurrency_key=concurrency_key,
        max_per_key=max_per_key if concurrency_key is not None else 1,
        ordering_key=keyed.ordering_key,
        debounce_key=keyed.debounce_key,
        debounce=keyed.debounce,
        debounce_max_wait=keyed.debounce_max_wait,
        priority=flow.priority,
        fairness_key=flow.fairness_key,
        fairness_weight=flow.fairness_weight,
    )


def started(channel: Channel | None, run_id: str, key: str, name: str) -> None:
    """An execution this process created: on its Channel (if it has one) and to observers."""
    if channel is not None:
        channel.publish(events.WorkflowStarted(run_id, key, name))
    if observe.observers:
        observe.workflow_started(name, key)


def check_same(found: WorkflowRecord, new: NewWorkflow, what: str) -> None:
    """``IdempotencyConflict`` unless ``found``, the execution already under ``new``'s key, is
    of the same workflow and arguments (a retry of the start that created it)."""
    if found.name != new.name or found.args_hash != new.args_hash:
        raise errors.IdempotencyConflict(
            f"{what} {new.key!r} is in use by workflow {found.name!r} with other arguments; a "
            "retry must send the same arguments, a new request needs a new key"
        )


def taken(record: WorkflowRecord, new: NewWorkflow, on_conflict: OnConflict) -> None:
    """A start found ``record`` under its key: refused as ``on_conflict`` says, or joined if
    it is the same workflow with the same arguments (else ``IdempotencyConflict``). A
    debounced start joins the run of its burst, which has the latest start's arguments: only
    its workflow must be the same."""
    key = new.key
    if new.debounce_key is not None:
        if record.name != new.name:
            raise errors.IdempotencyConflict(
                f"idempotency key {key!r} is in use by workflow {record.name!r}; a new "
                "request needs a new key"
            )
        return
    if on_conflict is OnConflict.FAIL:
        raise errors.WorkflowAlreadyExists(key, record.status.value)
    if on_conflict is OnConflict.TERMINATE_EXISTING:
        raise errors.WorkflowAlreadyExists(
            key,
            record.status.value,
            f"workflow {key!r} already ended ({record.status.value}); a key names one "
            "execution and a finished one is never run again: use a new key",
        )
    check_same(record, new, "idempotency key")
