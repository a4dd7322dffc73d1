"""Workflow programs built from the engine's building blocks, and hypothesis strategies for them.

A program is data (frozen dataclasses, JSON round-trip): one registered workflow, the
interpreter in ``world.py``, runs any program passed to it as its argument, so a generated
program needs no generated code. Every node has a label unique in its scenario; activities take
their label as their only argument, and what they do (succeed, fail once, ...) is looked up by it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, TypeAlias

from hypothesis import strategies as st

from tests.generative.settings import GenSettings

ActKind = Literal[
    "ok",
    "completable",
    "retry_ok",
    "retry_exhaust",
    "fail_once",
    "fail_always",
    "base_once",
    "hang",
]
RETRY_ATTEMPTS = 3
"""maximum_attempts of the activities' retry policy; ``retry_ok`` fails ``fails`` < 3 times."""


@dataclasses.dataclass(frozen=True)
class Act:
    label: str
    sync: bool
    kind: ActKind = "ok"
    fails: int = 0
    """retry_ok: attempts that raise RetryableError before one succeeds."""
    compensate: Literal["none", "ok", "fail_once"] = "none"
    catch: bool = False
    """Wrapped in ``try/except Exception`` by the workflow (value ``caught:<label>``)."""
    delay: float = 0.0
    """Virtual seconds an async activity takes."""
    cancels: bool = False
    """Asks for its own workflow's cancellation while it runs (first attempt; async only)."""


@dataclasses.dataclass(frozen=True)
class Gather:
    label: str
    branches: tuple[tuple[Node, ...], ...]


ChildKey = Literal["default", "user", "slash", "shared"]
"""default: the engine's key; user: ``child-<label>``; slash: ``<own key>/<n>``, n the node's
number in its program (when that has the derived form, the start must be refused and
``<own key>/<n>-kid`` is used); shared: ``shared-<program label>``, the same child program in
two top-level workflows."""


@dataclasses.dataclass(frozen=True)
class Child:
    label: str
    program: Program
    mode: Literal["get", "start_then_result", "start"]
    key: ChildKey = "default"


@dataclasses.dataclass(frozen=True)
class Receive:
    label: str
    timeout: float | None
    update: bool = False
    """Answered as an update (``manager.update(label).handle``) instead of a signal receive."""


EARLY_TIMEOUT = 86400.0
"""The timeout of a receive answered early (``timed_waits_early``): its signal is always sent
once the workflow has settled, long before it."""


@dataclasses.dataclass(frozen=True)
class Sleep:
    label: str
    seconds: float


@dataclasses.dataclass(frozen=True)
class Patch:
    """``sw.patched(label)``: one code version, so always the new path (its marker must replay)."""

    label: str


@dataclasses.dataclass(frozen=True)
class Publish:
    """``sw.write_stream("progress", label)``: a durable step that appends to the run's stream
    (each label exactly once, whatever the crashes; the checks read the stream back)."""

    label: str


Node: TypeAlias = Act | Gather | Child | Receive | Sleep | Patch | Publish


@dataclasses.dataclass(frozen=True)
class Program:
    label: str
    saga: Literal["with", "explicit", "none"]
    body: tuple[Node, ...]


# ---------------------------------------------------------------------- JSON


def to_json(node: Program | Node) -> dict[str, Any]:
    if isinstance(node, Program):
        return {"t": "program", "label": node.label, "saga": node.saga, "body": _nodes(node.body)}
    if isinstance(node, Gather):
        return {"t": "gather", "label": node.label, "branches": [_nodes(b) for b in node.branches]}
    if isinstance(node, Child):
        data = dataclasses.asdict(node)
        data["program"] = to_json(node.program)
        return {"t": "child", **data}
    kinds = {Act: "act", Receive: "receive", Sleep: "sleep", Patch: "patch", Publish: "publish"}
    kind = kinds[type(node)]
    return {"t": kind, **dataclasses.asdict(node)}


def _nodes(nodes: tuple[Node, ...]) -> list[dict[str, Any]]:
    return [to_json(n) for n in nodes]


def from_json(data: dict[str, Any]) -> Any:
    fields = {k: v for k, v in data.items() if k != "t"}
    kind = data["t"]
    if kind == "program":
        return Program(data["label"], data["saga"], tuple(from_json(n) for n in data["body"]))
    if kind == "gather":
        branches = tuple(tuple(from_json(n) for n in b) for b in data["branches"])
        return Gather(data["label"], branches)
    if kind == "child":
        fields["program"] = from_json(data["program"])
        return Child(**fields)
    kinds = {"act": Act, "receive": Receive, "sleep": Sleep, "patch": Patch, "publish": Publish}
    return kinds[kind](**fields)


def own_nodes(nodes: tuple[Node, ...]) -> list[Node]:
    """Every node of a body, depth first, without the nodes of its children's programs."""
    out: list[Node] = []
    for node in nodes:
        out.append(node)
        if isinstance(node, Gather):
            for branch in node.branches:
                out.extend(own_nodes(branch))
    return out


def walk(nodes: tuple[Node, ...]) -> list[Node]:
    """Every node of a body, depth first, children's programs included."""
    out: list[Node] = []
    for node in nodes:
        out.append(node)
        if isinstance(node, Gather):
            for branch in node.branches:
                out.extend(walk(branch))
        elif isinstance(node, Child):
            out.extend(walk(node.program.body))
    return out


# ---------------------------------------------------------------------- scenarios


@dataclasses.dataclass(frozen=True)
class TopLevel:
    """A workflow the client starts, and what the client does to it."""

    key: str
    program: Program
    signals: tuple[tuple[str, Literal["before", "after", "never"], bool], ...]
    """(receive label, when it is sent, sent twice with one dedupe id)."""
    cancel: bool = False
    """Cancel it after the first settle."""
    restart: bool = False
    """Start it again with TERMINATE_EXISTING after the first settle."""
    cancel_child: bool = False
    """Cancel its first child after the first settle."""
    timeout: float | None = None
    """Its deadline (``execute(deadline=)``)."""
    fork_from: int | None = None
    """Forked after the first settle (``settings.fork``, ``forks.py``): from its top-level step
    ``1 + fork_from % (last + 1)``; None: not forked."""
    fork_force: bool = False
    """The fork is forced (``force=True``): not refused for compensations it drops."""


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    """Faults by the index of the store call (counted over the whole scenario) they hit."""

    faults: tuple[tuple[int, str], ...] = ()
    overshoot: tuple[float, ...] = ()
    """Extra seconds added to successive clock jumps (delayed wake-ups), cycled."""
    concurrency: int = 100

    def describe(self) -> str:
        return ", ".join(f"{kind}@{i}" for i, kind in self.faults) or "no faults"


@dataclasses.dataclass(frozen=True)
class Scenario:
    workflows: tuple[TopLevel, ...]
    faults: FaultPlan
    scheduled: Program | None = None
    """A program started by a schedule (``settings.schedules``; see ``fleet.py``)."""
    versions: bool = False
    """Two code versions in the fleet (``settings.code_versions``; see ``fleet.py``)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "workflows": [
                {**dataclasses.asdict(w), "program": to_json(w.program)} for w in self.workflows
            ],
            "faults": dataclasses.asdict(self.faults),
            "scheduled": None if self.scheduled is None else to_json(self.scheduled),
            "versions": self.versions,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Scenario:
        tops = []
        for w in data["workflows"]:
            fields = dict(w)
            fields["program"] = from_json(w["program"])
            fields["signals"] = tuple(tuple(s) for s in w["signals"])
            tops.append(TopLevel(**fields))
        faults = data["faults"]
        plan = FaultPlan(
            faults=tuple((int(i), str(k)) for i, k in faults["faults"]),
            overshoot=tuple(faults["overshoot"]),
            concurrency=faults["concurrency"],
        )
        scheduled = data.get("scheduled")
        return cls(
            tuple(tops),
            plan,
            scheduled=None if scheduled is None else from_json(scheduled),
            versions=bool(data.get("versions", False)),
        )


# ---------------------------------------------------------------------- strategies


class _Labels:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.n = 0

    def __call__(self, kind: str) -> str:
        self.n += 1
        return f"{self.prefix}{kind}{self.n}"


def _act_kinds(s: GenSettings) -> list[ActKind]:
    kinds: list[ActKind] = ["ok"]
    if s.completable_errors:
        kinds.append("completable")
    if s.retryable_errors:
        kinds += ["retry_ok", "retry_exhaust"]
    if s.incompletable_errors:
        kinds += ["fail_once", "fail_always"]
    if s.base_exceptions:
        kinds.append("base_once")
    return kinds


@st.composite
def _act(
    draw: st.DrawFn, s: GenSettings, labels: _Labels, compensable: bool, in_gather: bool
) -> Act:
    sync_choices = [b for b, on in ((True, s.sync_activities), (False, s.async_activities)) if on]
    sync = draw(st.sampled_from(sync_choices))
    # "ok" is listed twice: most steps succeed, as in real workflows.
    kinds = ["ok", *_act_kinds(s)]
    if in_gather and not s.business_errors_in_gather:
        kinds = [k for k in kinds if k != "completable"]
    kind = draw(st.sampled_from(kinds))
    comp_choices: list[Literal["none", "ok", "fail_once"]] = ["none"]
    if compensable:
        comp_choices += ["ok", "ok"]  # twice: most compensations succeed at once
        if s.failing_compensations:
            comp_choices.append("fail_once")
    compensate = draw(st.sampled_from(comp_choices))
    catch = s.catch_all and draw(st.booleans())
    delay = 0.0
    if s.slow_activities and not sync:
        delay = draw(st.sampled_from([0.0, 5.0, 120.0]))
    fails = draw(st.integers(1, RETRY_ATTEMPTS - 1)) if kind == "retry_ok" else 0
    return Act(labels("a"), sync, kind, fails, compensate, catch, delay)


@dataclasses.dataclass(frozen=True)
class _Ctx:
    """Where a node is generated."""

    labels: _Labels
    depth: int
    in_gather: bool
    top: bool
    """In a top-level program (the client sends signals only to those)."""
    gather_ok: bool
    children_ok: bool

    def deeper(self, **changes: Any) -> _Ctx:
        return dataclasses.replace(self, depth=self.depth - 1, **changes)


def _node(s: GenSettings, ctx: _Ctx) -> st.SearchStrategy[Node]:
    labels = ctx.labels
    compensable = (s.saga_with or s.saga_explicit) and (not ctx.in_gather or s.compensated_gather)
    options: list[st.SearchStrategy[Node]] = [_act(s, labels, compensable, ctx.in_gather)]
    waits = not ctx.in_gather or s.waits_beside_activities
    if s.timers:
        seconds = [0.5, 30.0, 3600.0] if waits else [0.5]
        options.append(st.sampled_from(seconds).map(lambda sec: Sleep(labels("t"), sec)))
    if s.patches:
        options.append(st.just(None).map(lambda _: Patch(labels("p"))))
    if s.streams:
        options.append(st.just(None).map(lambda _: Publish(labels("w"))))
    if s.signals and ctx.top and waits:
        answered = st.booleans() if s.updates else st.just(False)
        options.append(
            st.tuples(st.sampled_from([None, 7200.0]), answered).map(
                lambda tu: Receive(labels("r"), tu[0], tu[1])
            )
        )
    if s.timed_waits_early and ctx.top and waits:
        options.append(st.just(EARLY_TIMEOUT).map(lambda t: Receive(labels("r"), t)))
    if ctx.depth > 0:
        if s.gather and ctx.gather_ok:
            inner = ctx.deeper(in_gather=True)
            if not s.nested_gather:
                inner = dataclasses.replace(inner, depth=0)
            options.append(_gather(s, inner))
        if (s.children_get or s.children_start) and ctx.children_ok:
            options.append(_child(s, labels, ctx.depth - 1, waits))
    return st.one_of(options)


@st.composite
def _gather(draw: st.DrawFn, s: GenSettings, ctx: _Ctx) -> Gather:
    label = ctx.labels("g")
    branch = st.lists(_node(s, ctx), min_size=1, max_size=3).map(tuple)
    if not s.branches_opening_with_gather:
        branch = branch.map(lambda b: _opened(b, ctx.labels))
    branches = draw(st.lists(branch, min_size=2, max_size=3).map(tuple))
    return Gather(label, branches)


def _opened(branch: tuple[Node, ...], labels: _Labels) -> tuple[Node, ...]:
    """The branch, with an activity first if it would open with an inner gather."""
    if isinstance(branch[0], Gather):
        return (Act(labels("a"), sync=False), *branch)
    return branch


@st.composite
def _child(draw: st.DrawFn, s: GenSettings, labels: _Labels, depth: int, wait: bool) -> Child:
    label = labels("c")
    modes: list[Literal["get", "start_then_result", "start"]] = []
    if s.children_get and wait:
        modes += ["get", "start_then_result"]
    if s.children_start or not modes:
        modes.append("start")
    mode = draw(st.sampled_from(modes))
    keys: list[ChildKey] = ["default"]
    if s.user_child_keys:
        keys += ["user", "slash"]
    key = draw(st.sampled_from(keys))
    program = draw(_program(s, _Labels(f"{label}."), depth, top=False))
    return Child(label, program, mode, key)


@st.composite
def _program(draw: st.DrawFn, s: GenSettings, labels: _Labels, depth: int, top: bool) -> Program:
    sagas: list[Literal["with", "explicit", "none"]] = ["none"]
    if s.saga_with:
        sagas.append("with")
    if s.saga_explicit:
        sagas.append("explicit")
    saga = draw(st.sampled_from(sagas))
    gather_ok = children_ok = True
    if not s.children_beside_gather:
        gather_ok = draw(st.booleans())
        children_ok = not gather_ok
    ctx = _Ctx(labels, depth, False, top, gather_ok, children_ok)
    body = draw(st.lists(_node(s, ctx), min_size=1, max_size=5))
    return Program(labels.prefix.rstrip("."), saga, tuple(body))


@st.composite
def _last_step(
    draw: st.DrawFn, s: GenSettings, program: Program, i: int
) -> tuple[Program, float | None]:
    """Maybe a last step that cancels its own workflow while it runs (``cancel_last_step``),
    or one that never returns under a deadline (``deadline_hang``): the program, its deadline."""
    ends: list[str] = ["none", "none", "none"]
    if s.cancel_last_step:
        ends.append("cancels")
    if s.deadline_hang:
        ends.append("hang")
    end = draw(st.sampled_from(ends))
    if end == "cancels":
        last = Act(f"w{i}.last", sync=False, compensate="ok", cancels=True)
        return dataclasses.replace(program, body=(*program.body, last)), None
    if end == "hang":
        hang = Act(f"w{i}.hang", sync=False, kind="hang")
        timeout = draw(st.sampled_from([1.5, 90.0]))
        return dataclasses.replace(program, body=(*program.body, hang)), timeout
    return program, None


FAULT_KINDS = (
    ("crash_before", "crash"),
    ("crash_after", "crash"),
    ("restart_after", "graceful_restart"),
    ("error_before", "db_errors"),
    ("lost_ack", "lost_acks"),
    ("stall", "lease_steal"),
)


def shared_key(program: Program) -> str:
    """The key of a child under ``key="shared"``."""
    return f"shared-{program.label}"


@st.composite
def scenarios(draw: st.DrawFn, s: GenSettings) -> Scenario:
    count = draw(st.integers(1, 2))
    shared: Program | None = None
    if count == 2 and s.shared_child_keys and s.children_get and draw(st.booleans()):
        shared = draw(_program(s, _Labels("s."), 1, top=False))
    tops = []
    for i in range(count):
        program = draw(_program(s, _Labels(f"w{i}."), 2, top=True))
        timeout = None
        if shared is not None:  # both wait for it, last: one creates it, the other attaches
            wait = Child(f"w{i}.shared", shared, "get", "shared")
            program = dataclasses.replace(program, body=(*program.body, wait))
        else:
            program, timeout = draw(_last_step(s, program, i))
        receives = [n for n in walk(program.body) if isinstance(n, Receive)]
        when: st.SearchStrategy[Literal["before", "after", "never"]] = st.sampled_from(
            ["before", "after", "never"]
        )
        signals = tuple(
            (
                r.label,
                "after" if r.timeout == EARLY_TIMEOUT else draw(when),
                s.signal_dedupe and draw(st.booleans()),
            )
            for r in receives
        )
        has_child = any(isinstance(n, Child) for n in walk(program.body))
        cancels = any(isinstance(n, Act) and n.cancels for n in walk(program.body))
        fork_from = None
        if s.fork and timeout is None and not cancels and draw(st.integers(0, 2)) == 0:
            fork_from = draw(st.integers(0, 12))
        tops.append(
            TopLevel(
                key=f"wf{i}",
                program=program,
                signals=signals,
                cancel=s.cancel and draw(st.integers(0, 5)) == 0,
                restart=s.terminate_restart and draw(st.integers(0, 4)) == 0,
                cancel_child=s.cancel_child and has_child and draw(st.booleans()),
                timeout=timeout,
                fork_from=fork_from,
                fork_force=fork_from is not None and draw(st.integers(0, 3)) == 0,
            )
        )
    kinds = [k for k, flag in FAULT_KINDS if getattr(s, flag)]
    faults: tuple[tuple[int, str], ...] = ()
    if kinds:
        drawn = draw(
            st.lists(
                st.tuples(st.integers(0, 30), st.sampled_from(kinds)),
                max_size=4,
                unique_by=lambda f: f[0],
            )
        )
        faults = tuple(sorted(drawn))
    overshoot: tuple[float, ...] = ()
    if s.delayed_wakeups:
        overshoot = tuple(draw(st.lists(st.sampled_from([0.0, 0.0, 3.0, 45.0]), max_size=4)))
    concurrency = draw(st.sampled_from([100, 100, 2])) if s.slow_activities else 100
    scheduled = None
    if s.schedules and draw(st.integers(0, 3)) == 0:
        # No signals (nobody sends to a tick's run) and no keys the program chooses (each
        # tick's children are its own).
        plain = s.enabled(user_child_keys=False, shared_child_keys=False)
        scheduled = draw(_program(plain, _Labels(f"{SCHEDULED}."), 1, top=False))
    versions = s.code_versions and draw(st.integers(0, 3)) == 0
    if versions:
        # The version checks (fleet.py) know the top-level keys' versions, not their forks'.
        tops = [dataclasses.replace(t, fork_from=None, fork_force=False) for t in tops]
    return Scenario(tuple(tops), FaultPlan(faults, overshoot, concurrency), scheduled, versions)


SCHEDULED = "sch"
"""The label of the scheduled program (and the prefix of its nodes' labels)."""
