"""The one ContextVar holding the workflow execution the current task belongs to.

Durable calls are numbered per *branch*: the workflow's own task is the root branch, and every
task it spawns (``asyncio.gather``, ``create_task``) becomes a child branch at its first durable
call, numbered in the order branches make their first call. A call's id is its branch path plus
its position in the branch ("3", "2/1", "2/1/4"), so ids do not depend on the order in which
concurrent activities happen to finish, and replay assigns every call the id it had before.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sagaway._engine.executor import Execution


class Branch:
    """Numbering state of one task of a workflow."""

    __slots__ = ("branches", "calls", "done", "prefix", "subbranches", "task")

    def __init__(self, task: asyncio.Task[object] | None, prefix: str) -> None:
        self.task = task
        self.prefix = prefix
        self.calls = 0
        self.branches = 0
        self.done = 0.0
        """Completion order (see ``note_completion``) of the last outcome this branch received."""
        self.subbranches: list[Branch] = []

    def next_call(self) -> tuple[str, int]:
        self.calls += 1
        return f"{self.prefix}{self.calls}", self.calls

    def child(self, task: asyncio.Task[object] | None) -> Branch:
        self.branches += 1
        branch = Branch(task, f"{self.prefix}{self.branches}/")
        self.subbranches.append(branch)
        return branch

    def latest_completion(self) -> float:
        """The latest completion this branch and the branches it spawned have received."""
        latest = self.done
        for branch in self.subbranches:
            latest = max(latest, branch.latest_completion())
        return latest


@dataclasses.dataclass(frozen=True, slots=True)
class _State:
    execution: Execution
    branch: Branch


_current: contextvars.ContextVar[_State | None] = contextvars.ContextVar(
    "sagaway_workflow", default=None
)


def enter(execution: Execution) -> contextvars.Token[_State | None]:
    """Mark the current task as running ``execution``'s workflow code."""
    return _current.set(_State(execution, Branch(asyncio.current_task(), "")))


def leave(token: contextvars.Token[_State | None]) -> None:
    _current.reset(token)


def suspend_workflow_context() -> contextvars.Token[_State | None]:
    """Hide the workflow from code that runs inside an activity."""
    return _current.set(None)


def current_execution() -> Execution | None:
    state = _current.get()
    return None if state is None else state.execution


def next_call_id() -> tuple[Execution, str, int]:
    """The execution and the id of the durable call being made now."""
    state = _current.get()
    if state is None:
        raise RuntimeError("not inside a workflow")
    task = asyncio.current_task()
    branch = state.branch
    if branch.task is not task:
        branch = branch.child(task)
        _current.set(_State(state.execution, branch))
    call_id, seq = branch.next_call()
    return state.execution, call_id, seq


def note_completion(order: float) -> None:
    """Record that the current branch received an outcome completed at ``order``.

    ``order`` is the step's recorded completion time, strictly increasing within an execution
    (see ``Execution.completion_time``), so it orders completions the same way on every replay,
    although a replay returns recorded outcomes at once and in another interleaving.
    """
    state = _current.get()
    if state is not None:
        state.branch.done = max(state.branch.done, order)


def causal_completion() -> float:
    """The latest completion the current branch has seen, its spawned branches included: the
    position of "the step just done" in completion order (0.0 outside a workflow)."""
    state = _current.get()
    return 0.0 if state is None else state.branch.latest_completion()
