"""The role each call of ``sagaway.v1.Engine`` needs: one table, and default deny.

A call not in ``RPC_ROLES`` is refused whoever makes it, so a new RPC stays closed until it
is given a role here (a unit test fails for a proto method without one). A principal may make
a call when it holds one of the roles listed (``Principal.may``: ``admin`` holds every role,
``operate`` and ``worker`` hold ``read``). The lists follow who makes each call:

- ``read``: calls that change nothing (records, steps, lists, counts, wake-ups, results).
- ``operate``: an operator's or an application's client (``manager.connect()``): start,
  signal, cancel, retry, fork.
- ``worker``: a Manager running workflows: claims, leases, step records, ends, waits, queue
  slots, schedule ticks. Its workflows also start children, send signals and cancel children,
  so those calls list ``worker`` beside ``operate``; and it writes the schedules its code
  declares (``register_workflow(schedule=...)``) when it opens, so ``PutSchedule`` lists it.
- ``admin``: ending a workflow without compensation (terminate, and a start that replaces a
  live execution), purge, and pausing or deleting schedules.

Some calls need more depending on their request (``CONDITIONS``): ``CreateWorkflow`` replacing a
live execution is a terminate (``admin``), and one that takes a lease claims the run
(``worker``). ``Batch`` needs no role itself; each call in it is judged as if it came alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from sagaway.principals import Principal, Role

ANYONE: frozenset[Role] = frozenset()
"""Any authenticated principal."""
_R = frozenset({Role.READ})
_O = frozenset({Role.OPERATE})
_W = frozenset({Role.WORKER})
_A = frozenset({Role.ADMIN})
_OW = frozenset({Role.OPERATE, Role.WORKER})
_WA = frozenset({Role.WORKER, Role.ADMIN})

RPC_ROLES: Mapping[str, frozenset[Role]] = {
    # session
    "Hello": ANYONE,
    "ServerTime": ANYONE,
    "Batch": ANYONE,  # each call in it is judged on its own
    # reads
    "Watch": _R,
    "AwaitWorkflow": _R,
    "GetWorkflow": _R,
    "GetRun": _R,
    "ListWorkflows": _R,
    "ListPage": _R,
    "LoadSteps": _R,
    "LoadStepsMany": _R,
    "CountByStatus": _R,
    "CountPurgeable": _R,
    "ListSignals": _R,
    "ListCancelRequests": _R,
    "CancelRequests": _R,
    "ListAttemptErrors": _R,
    "ListSchedules": _R,
    "NextDue": _R,
    "ListAudit": _R,
    "PausedRuns": _R,  # each worker's heartbeat: paused runs it holds
    "ListPausedCalls": _R,
    "ReadOutputs": _R,
    "ReadStream": _R,
    "GetEvent": _R,
    "ListSearchAttributes": _R,
    "StartPlace": _R,
    "QueuePlace": _R,
    # operator actions (and a workflow's own starts, signals and cancels of children)
    "StartWorkflow": _O,
    "CreateWorkflow": _OW,
    "SendSignal": _OW,
    "RequestCancel": _OW,
    "RetryNow": _O,
    "ForkWorkflow": _O,
    "PauseWorkflow": _O,
    "PauseCalls": _O,
    # running work
    "ClaimDue": _W,
    "RenewLeases": _W,
    "RecordStep": _W,
    "Publish": _W,
    "FinishWorkflow": _W,
    "SuspendWorkflow": _W,
    "ReleaseWorkflow": _W,
    "WaitWorkflow": _W,
    "WaitForChild": _W,
    "ReceiveSignal": _W,
    "AcquireQueueSlot": _W,
    "RenewQueueSlot": _W,
    "ReleaseQueueSlot": _W,
    "LeaveQueue": _W,
    "FireSchedule": _W,
    "PutSchedule": _WA,  # a worker writes the schedules its code declares
    # administration
    "EndWorkflow": _A,
    "PurgeEnded": _A,
    "SetSchedulePaused": _A,
    "DeleteSchedule": _A,
    "RecordAudit": _A,  # the entry of a purge, written after its batches
}
"""The roles that may make each call (any one of them suffices; empty: any principal)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Condition:
    """More roles a call needs when its request ``applies``."""

    what: str
    """The kind of request, for the refusal's message."""
    roles: frozenset[Role]
    applies: Callable[[Any], bool]


CONDITIONS: Mapping[str, tuple[Condition, ...]] = {
    "CreateWorkflow": (
        Condition(
            "replacing a live execution (OnConflict.TERMINATE_EXISTING)",
            _A,
            lambda request: bool(request.replace_live),
        ),
        Condition(
            "under a lease (a worker's own run)", _W, lambda request: request.HasField("lease")
        ),
    ),
}


def _names(roles: frozenset[Role]) -> str:
    ordered = [r.value for r in Role if r in roles]
    return (
        f"the role {ordered[0]}" if len(ordered) == 1 else f"one of the roles {', '.join(ordered)}"
    )


def _held(principal: Principal) -> str:
    return ", ".join(r.value for r in Role if r in principal.roles) or "none"


def refusal(principal: Principal | None, method: str, request: Any = None) -> str | None:
    """Why ``principal`` may not make the call ``method`` with ``request`` (None: it may).
    ``request`` None (not parsed): its conditions are judged when it is."""
    needed = RPC_ROLES.get(method)
    if principal is None:
        return f"{method} refused: no authenticated principal"
    who = f"principal {principal.name!r} (roles: {_held(principal)})"
    if needed is None:
        return f"{who} may not call {method}: no role may (the call is not in the server's table)"
    if needed and not principal.may_any(needed):
        return f"{who} may not call {method}: it needs {_names(needed)}"
    if request is not None:
        for condition in CONDITIONS.get(method, ()):
            if condition.applies(request) and not principal.may_any(condition.roles):
                return (
                    f"{who} may not call {method} {condition.what}: it needs "
                    f"{_names(condition.roles)}"
                )
    return None
