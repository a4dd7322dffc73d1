"""The one ContextVar holding the workflow execution the current task belongs to.

Durable calls are numbered per *branch*: the workflow's own task is the root branch, and every
task its code spawns (``asyncio.gather``, ``create_task``, a ``TaskGroup``) is a child branch,
numbered in the order the tasks are *created*: that order is the program's, the same on every
run, while the order in which branches reach their first durable call depends on timing (a
replay returns recorded calls at once). A call's id is its branch path plus its position in the
branch ("3", "2/1", "2/1/4"), so ids do not depend on the order in which concurrent activities
happen to finish, and replay assigns every call the id it had before.

Tasks are numbered at creation by a task factory installed on the worker's event loop
(``install_task_factory``). Tasks the engine creates while serving a durable call (store
writes, timers, waits) are not workflow branches and take no number (``Branch.engine_depth``).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
from collections.abc import Coroutine
from typing import Any


class Branch:
    """Numbering state of one task of a workflow."""

    __slots__ = ("branches", "calls", "done", "engine_depth", "prefix", "subbranches", "task")

    def __init__(self, task: asyncio.Task[Any] | None, prefix: str) -> None:
        self.task = task
        self.prefix = prefix
        self.calls = 0
        self.branches = 0
        self.engine_depth = 0
        """Durable calls of this branch being served now: tasks created meanwhile are the
        engine's, not workflow branches."""
        self.done = 0.0
        """Completion order (see ``note_completion``) of the last outcome this branch received."""
        self.subbranches: list[Branch] = []

    def next_call(self) -> tuple[str, int]:
        self.calls += 1
        return f"{self.prefix}{self.calls}", self.calls

    def child(self, task: asyncio.Task[Any] | None) -> Branch:
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
    execution: object
    """The ``executor.Execution`` (typed there: ``executor.current_execution``)."""
    branch: Branch


_current: contextvars.ContextVar[_State | None] = contextvars.ContextVar(
    "sagaway_workflow", default=None
)


def enter(execution: object) -> contextvars.Token[_State | None]:
    """Mark the current task as running ``execution``'s workflow code."""
    return _current.set(_State(execution, Branch(asyncio.current_task(), "")))


def leave(token: contextvars.Token[_State | None]) -> None:
    _current.reset(token)


def suspend_workflow_context() -> contextvars.Token[_State | None]:
    """Hide the workflow from code that runs inside an activity."""
    return _current.set(None)


def current_owner() -> object | None:
    """The execution whose workflow code runs in this task (see ``executor.current_execution``)."""
    state = _current.get()
    return None if state is None else state.execution


def current_branch() -> Branch | None:
    """The branch of the current task (None outside a workflow).

    A durable call raises its ``engine_depth`` while it is served: tasks the engine creates
    meanwhile take no number (``install_task_factory``).
    """
    state = _current.get()
    return None if state is None else state.branch


def install_task_factory(loop: asyncio.AbstractEventLoop) -> None:
    """Number the tasks workflow code creates on ``loop`` at creation (idempotent).

    The loop's existing factory, if any, still creates the tasks.
    """
    previous = loop.get_task_factory()
    if getattr(previous, "_sagaway_numbering", False):
        return

    def create(
        loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
    ) -> asyncio.Future[Any]:
        state = _current.get()
        branch: Branch | None = None
        if (
            state is not None
            and kwargs.get("context") is None
            and not state.branch.engine_depth
            and state.branch.task is asyncio.current_task(loop)
        ):
            # Created by workflow code: a branch, numbered now, in program order.
            branch = state.branch.child(None)
            context = contextvars.copy_context()
            context.run(_current.set, _State(state.execution, branch))
            kwargs["context"] = context
        task: asyncio.Future[Any]
        if previous is None:
            task = asyncio.Task(coro, loop=loop, **kwargs)
        else:
            task = previous(loop, coro, **kwargs)
        if branch is not None:
            branch.task = task  # type: ignore[assignment]  # a Task, whatever factory made it
        return task

    create._sagaway_numbering = True  # type: ignore[attr-defined]
    loop.set_task_factory(create)  # type: ignore[arg-type]


def next_call_id() -> tuple[str, int]:
    """The id and sequence number of the durable call being made now."""
    return _branch_here().next_call()


def peek_call_id() -> str:
    """The id the next durable call of this branch will take (nothing is taken)."""
    branch = _branch_here()
    return f"{branch.prefix}{branch.calls + 1}"


def _branch_here() -> Branch:
    state = _current.get()
    if state is None:
        raise RuntimeError("not inside a workflow")
    task = asyncio.current_task()
    branch = state.branch
    if branch.task is not task:
        # A task not numbered at creation (another task factory replaced ours): numbered now.
        branch = branch.child(task)
        _current.set(_State(state.execution, branch))
    return branch


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
