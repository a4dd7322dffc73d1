"""The reference model: how a program's run must end, computed from the program alone.

It knows nothing of the engine: activities return their label, ``completable`` raises a
business error, retries and one-off failures end in success, permanent failures leave the run
SUSPENDED, a receive whose signal is never sent leaves it WAITING. Gather branches all run to
their end and the first failing branch (in branch order) decides the error. What the client did
(signals sent, cancels and restarts that took effect) comes in through ``Env``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tests.generative.program import (
    Act,
    Child,
    Gather,
    Node,
    Patch,
    Program,
    Publish,
    Receive,
    Sleep,
)

SUSPENDED = "SUSPENDED"
WAITING = "WAITING"


@dataclasses.dataclass(frozen=True)
class Expect:
    statuses: frozenset[str]
    result: Any = None
    """The result, when COMPLETED is expected."""
    error: str | None = None
    """Text the recorded error must contain, when FAILED is expected (None: any)."""
    compensated: frozenset[str] | None = frozenset()
    """Labels whose compensation must have run exactly once (None: not checked)."""

    def holds(self, status: str, suspend_count: int) -> bool:
        """Whether a run in ``status``, suspended ``suspend_count`` times, stands where this
        says. Recovery runs a SUSPENDED run again after a backoff, and one whose retries run
        out suspends again: a run expected SUSPENDED that has been suspended may be RUNNING
        such a retry. Two of them retried out of phase are never SUSPENDED at the same idle
        moment, and the final settle would spend its jumps waiting for one."""
        if status in self.statuses:
            return True
        return status == "RUNNING" and suspend_count > 0 and SUSPENDED in self.statuses

    def describe(self) -> str:
        parts = ["|".join(sorted(self.statuses))]
        if "COMPLETED" in self.statuses:
            parts.append(f"result={self.result!r}")
        if self.error is not None:
            parts.append(f"error~{self.error!r}")
        if self.compensated:
            parts.append(f"compensations={sorted(self.compensated)}")
        return " ".join(parts)


@dataclasses.dataclass(frozen=True)
class Env:
    """What happened outside the program that changes its outcome."""

    signals: frozenset[str] = frozenset()
    """Receive labels whose signal was sent to this run."""
    cancelled_children: frozenset[str] = frozenset()
    """Program labels of children that were cancelled while live."""


@dataclasses.dataclass
class _Out:
    values: list[Any]
    comps: list[str]
    fail: str | None = None
    """Label of the business error the body raised (``*`` : any error text)."""
    stuck: frozenset[str] = frozenset()
    cancelled_child: bool = False


def either(a: Expect, b: Expect) -> Expect:
    """One of two outcomes (a cancel request to a child that may or may not take effect)."""
    if a == b:
        return a
    result = a.result if "COMPLETED" in a.statuses else b.result
    error = a.error if a.error == b.error else None
    compensated = a.compensated if a.compensated == b.compensated else None
    return Expect(a.statuses | b.statuses, result, error, compensated)


def cancellable(want: Expect, *, never_lost: bool = False) -> Expect:
    """A run a cancel request reached (or whose deadline passes): it ends CANCELLED (after
    compensating, checked by the invariants), or FAILED if a business error was already being
    compensated. It never stays WAITING or SUSPENDED: the request wakes it. ``never_lost``
    False: it may also end as it would have without the request (COMPLETED), as before the
    ends of sagas and workflows delivered a request that came during the last step."""
    ends = want.statuses & ({"FAILED"} if never_lost else {"COMPLETED", "FAILED"})
    return dataclasses.replace(want, statuses=ends | {"CANCELLED"})


def expect(program: Program, env: Env) -> Expect:
    out = _body(program.body, env)
    if out.stuck:
        return Expect(out.stuck)
    if out.fail is not None:
        comps = frozenset(out.comps) if program.saga != "none" else frozenset()
        if out.cancelled_child:
            # A parent whose child was cancelled ends too, with its compensations run.
            return Expect(frozenset({"FAILED", "CANCELLED"}), None, None, comps)
        return Expect(frozenset({"FAILED"}), None, out.fail, comps)
    return Expect(frozenset({"COMPLETED"}), out.values)


def _body(nodes: tuple[Node, ...], env: Env) -> _Out:
    acc = _Out([], [])
    for node in nodes:
        part = _node(node, env)
        acc.values.extend(part.values)
        acc.comps.extend(part.comps)
        if part.fail is not None or part.stuck:
            acc.fail, acc.stuck, acc.cancelled_child = part.fail, part.stuck, part.cancelled_child
            return acc
    return acc


def _node(node: Node, env: Env) -> _Out:
    if isinstance(node, Act):
        if node.kind == "hang":  # never returns: only its run's deadline ends it
            return _Out([], [], stuck=frozenset({"CANCELLED"}))
        if node.kind in ("retry_exhaust", "fail_always"):
            return _Out([], [], stuck=frozenset({SUSPENDED}))
        if node.kind == "completable":
            if node.catch:
                return _Out([f"caught:{node.label}"], [])
            return _Out([], [], fail=node.label)
        comps = [node.label] if node.compensate != "none" else []
        return _Out([node.label], comps)
    if isinstance(node, Gather):
        parts = [_body(b, env) for b in node.branches]
        values = [v for p in parts for v in p.values]
        comps = [c for p in parts for c in p.comps]
        stuck = frozenset().union(*(p.stuck for p in parts))
        if stuck:
            return _Out(values, comps, stuck=stuck)
        failed = [p for p in parts if p.fail is not None]
        if failed:
            first = failed[0]
            return _Out(values, comps, fail=first.fail, cancelled_child=first.cancelled_child)
        return _Out(values, comps)
    if isinstance(node, Child):
        if node.mode == "start":
            return _Out([f"started:{node.label}"], [])
        if node.program.label in env.cancelled_children:
            return _Out([], [], fail="*", cancelled_child=True)
        # Signals go to top-level workflows only; a cancelled grandchild ends its parent too.
        child = expect(node.program, Env(cancelled_children=env.cancelled_children))
        if "CANCELLED" in child.statuses:
            return _Out([], [], fail="*", cancelled_child=True)
        if child.statuses == {"COMPLETED"}:
            return _Out([child.result], [])
        if child.statuses == {"FAILED"}:
            return _Out([], [], fail=child.error)
        return _Out([], [], stuck=frozenset({WAITING}))
    if isinstance(node, Receive):
        if node.label in env.signals:
            return _Out([f"sig:{node.label}"], [])
        if node.timeout is not None:
            return _Out([f"timeout:{node.label}"], [])
        return _Out([], [], stuck=frozenset({WAITING}))
    if isinstance(node, Patch):
        return _Out([f"patched:{node.label}"], [])
    if isinstance(node, Publish):
        return _Out([f"published:{node.label}"], [])
    assert isinstance(node, Sleep)
    return _Out([], [])
