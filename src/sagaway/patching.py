"""Patches: changing workflow code while executions of it are running (``sw.patched``).

Not to be confused with code versions (``Manager(version=...)``, ``_engine/versions.py``),
which label the deploy that created an execution and route it to that deploy's workers. A
patch is a branch inside one workflow's code, decided per execution by its history.

A workflow's durable calls are replayed from its history, so new code must make the calls an
execution already made, in the same order. To change them for new executions while old ones go
on, branch on ``sw.patched("change-id")``::

    if sw.patched("charge-before-ship"):
        await charge(order)            # new code path
        await ship(order)
    else:
        await ship(order)              # the path executions that passed here before took
        await charge(order)

Once no execution can take the old path any more (``sagaway replay --all-live`` says so), keep
only the new code and leave ``sw.deprecate_patch("charge-before-ship")`` where ``patched``
stood; remove that too once the executions that recorded the change have ended. See
``docs/patching.md``.
"""

from __future__ import annotations

from sagaway import errors
from sagaway._engine import patches
from sagaway._engine.executor import current_execution
from sagaway._engine.text_checks import check_plain

MAX_CHANGE_ID = 200


def patched(change_id: str) -> bool:
    """True when this execution runs the new code of ``change_id`` here; False when it passed
    this point before the change was deployed. The answer never changes for one execution (the
    first True is recorded as a marker step)."""
    _check(change_id, "patched")
    execution = current_execution()
    if execution is None:
        raise errors.SagawayError(
            "sw.patched() decides a workflow's path: call it in workflow code, not in an "
            "activity or outside a workflow"
        )
    return patches.patched(execution, change_id)


def deprecate_patch(change_id: str) -> None:
    """Stand where ``sw.patched(change_id)`` stood once only its new path is left: executions
    that recorded the change replay past its marker; nothing is recorded."""
    _check(change_id, "deprecate_patch")
    execution = current_execution()
    if execution is None:
        raise errors.SagawayError(
            "sw.deprecate_patch() belongs where sw.patched() was, in workflow code"
        )
    patches.deprecate_patch(execution, change_id)


def _check(change_id: object, what: str) -> None:
    if not isinstance(change_id, str) or not change_id.strip():
        raise ValueError(f"{what}() needs a change id: a non-empty string, not {change_id!r}")
    if len(change_id) > MAX_CHANGE_ID:
        raise ValueError(f"{what}(): a change id has at most {MAX_CHANGE_ID} characters")
    check_plain(change_id, f"{what}() change id")
