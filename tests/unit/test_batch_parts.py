"""The parts of batch operations that need no database: the filter's checks and JSON, the
report's counts, the default signal dedupe id, the pacer, and how a call's answer becomes an
outcome (a workflow that ended between the listing and the call is ``raced``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import sagaway as sw
from sagaway.manager import batch_calls
from sagaway.store.records import WorkflowRecord

S = sw.WorkflowStatus
Out = sw.BatchOutcome


def test_filter_checks_and_json() -> None:
    f = sw.WorkflowFilter(name="order", statuses=frozenset({"waiting", S.RUNNING}), since=1.0)
    assert f.statuses == {S.WAITING, S.RUNNING}
    assert f.to_json() == {"name": "order", "statuses": ["RUNNING", "WAITING"], "since": 1.0}
    assert f.describe() == "name=order, statuses=['RUNNING', 'WAITING'], since=1.0"
    assert sw.WorkflowFilter().empty and not f.empty
    assert sw.WorkflowFilter().effective_statuses(sw.BatchAction.RETRY) == {S.SUSPENDED}
    assert S.COMPLETED not in sw.WorkflowFilter().effective_statuses(sw.BatchAction.CANCEL)
    assert f.effective_statuses(sw.BatchAction.RETRY) == {S.WAITING, S.RUNNING}
    for bad in (
        {"statuses": frozenset({"BOGUS"})},
        {"since": 2.0, "until": 2.0},
        {"since": float("nan")},
        {"name": ""},
    ):
        with pytest.raises(ValueError):
            sw.WorkflowFilter(**bad)
    with pytest.raises(TypeError):
        sw.WorkflowFilter(statuses="RUNNING")  # type: ignore[arg-type]


def test_filter_by_search_attributes() -> None:
    import datetime

    from sagaway import search

    placed = datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC)
    f = sw.WorkflowFilter(
        where={"customer": "4711", "items": 3, "amount": 9.5, "vip": False, "placed": placed}
    )
    assert f.where == (
        'customer="4711"',
        "items=3",
        "amount=9.5",
        "vip=false",
        "placed=2026-12-01T00:00:00+00:00",
    )
    # Each reads back as the equality of its value: the quoted string as text only.
    read = search.filters(list(f.where))
    assert (read[0].text, read[0].number) == ("4711", None)
    assert (read[1].number, read[3].number, read[4].number) == (3.0, 0.0, placed.timestamp())
    assert sw.WorkflowFilter(where="amount>=100").where == ("amount>=100",)
    assert sw.WorkflowFilter(where=["a=1", "b<2"]).describe() == "where=['a=1', 'b<2']"
    assert not sw.WorkflowFilter(where=["a=1"]).empty
    for bad in ({"x": None}, {"x": float("nan")}, {"x": datetime.datetime(2026, 1, 1)}, [""], [3]):
        with pytest.raises(TypeError):
            sw.WorkflowFilter(where=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="filter texts or a mapping"):
        sw.WorkflowFilter(where=7)  # type: ignore[arg-type]


def test_report_counts_and_json() -> None:
    items = tuple(
        sw.BatchItem(f"k{i}", f"r{i}", "order", S.RUNNING, outcome)
        for i, outcome in enumerate([Out.DONE, Out.DONE, Out.RACED, Out.FAILED])
    )
    report = sw.BatchReport(sw.BatchAction.CANCEL, sw.WorkflowFilter(), False, items, 1.0, 2.0)
    assert report.matched == 4 and len(report.done) == 2 and len(report.refused) == 2
    assert [i.key for i in report.failed] == ["k3"]
    counts = report.counts()
    assert counts[Out.DONE] == 2 and counts[Out.NOT_FOUND] == 0 and set(counts) == set(Out)
    data = report.to_json()
    assert data["counts"]["raced"] == 1 and data["items"][0]["outcome"] == "done"


def test_default_signal_dedupe_id_is_stable() -> None:
    one = batch_calls.signal_dedupe_id("go", {"a": 1, "b": 2})
    assert one == batch_calls.signal_dedupe_id("go", {"b": 2, "a": 1})
    assert one != batch_calls.signal_dedupe_id("go", {"a": 2, "b": 2})
    assert one != batch_calls.signal_dedupe_id("stop", {"a": 1, "b": 2})


class StepClock:
    """Time moves only by sleeping; records the sleeps."""

    def __init__(self) -> None:
        self.t = 100.0
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 9))
        self.t += seconds


async def test_pacer_spaces_the_calls() -> None:
    clock = StepClock()
    pacer = batch_calls._Pacer(clock, 4.0)
    for _ in range(5):
        await pacer.wait()
    assert clock.slept == [0.25, 0.25, 0.25, 0.25] and clock.t == 101.0
    clock.t += 10  # a slow call: the next one need not wait
    await pacer.wait()
    assert len(clock.slept) == 4
    unpaced = batch_calls._Pacer(clock, None)
    await unpaced.wait()
    assert len(clock.slept) == 4


RECORD = WorkflowRecord(
    run_id="r1",
    key="k1",
    name="order",
    args="[]",
    args_hash="h",
    status=S.WAITING,
    created_at=1.0,
    updated_at=1.0,
    result=None,
    error=None,
    parent_key=None,
    ended_at=None,
    lease_owner=None,
    lease_expires_at=None,
    next_run_at=None,
    suspend_count=0,
)


class FakeEngine:
    """``get`` answers the listed execution while ``before`` calls are left, then ``status``
    (None: not found) and ``run_id``: as if the workflow changed while the call was made."""

    def __init__(self, status: S | None, run_id: str = "r1", before: int = 1) -> None:
        self.status = status
        self.run_id = run_id
        self.before = before

    async def get(self, key: str) -> WorkflowRecord:
        if self.before > 0:
            self.before -= 1
            return RECORD
        if self.status is None:
            raise sw.WorkflowNotFound(key)
        return dataclasses.replace(RECORD, status=self.status, run_id=self.run_id)


def answer(value: Any) -> Any:
    async def call(key: str) -> Any:
        if isinstance(value, BaseException):
            raise value
        return value

    return call


async def attempt(engine: FakeEngine, value: Any, signal: bool = False) -> tuple[Out, str | None]:
    return await batch_calls._attempt(engine, RECORD, answer(value), signal)  # type: ignore[arg-type]


async def test_outcomes_of_a_call() -> None:
    assert (await attempt(FakeEngine(S.WAITING), True))[0] is Out.DONE
    # False: it ended (or left SUSPENDED) between the listing and the call.
    assert await attempt(FakeEngine(S.COMPLETED), False) == (
        Out.RACED,
        "COMPLETED since it was listed",
    )
    assert (await attempt(FakeEngine(S.WAITING), False, signal=True))[0] is Out.ALREADY_SENT
    assert (await attempt(FakeEngine(None), sw.WorkflowNotFound("k1")))[0] is Out.NOT_FOUND
    ended = sw.SagawayError("workflow 'k1' has ended")
    assert (await attempt(FakeEngine(S.CANCELLED), ended))[0] is Out.RACED
    assert await attempt(FakeEngine(S.WAITING), sw.SagawayError("odd")) == (Out.FAILED, "odd")
    # Looked up before the call: ended, or a new execution under the key, meanwhile.
    assert await attempt(FakeEngine(S.COMPLETED, before=0), True) == (
        Out.RACED,
        "ended COMPLETED since it was listed",
    )
    assert await attempt(FakeEngine(S.RUNNING, run_id="r2", before=0), True) == (
        Out.RACED,
        "a new execution (r2) since it was listed",
    )
    assert (await attempt(FakeEngine(None, before=0), True))[0] is Out.NOT_FOUND
    for stop in (sw.EngineUnavailable("down"), sw.PayloadError("too big")):
        with pytest.raises(type(stop)):
            await attempt(FakeEngine(S.WAITING), stop)


def test_precheck() -> None:
    ended = dataclasses.replace(RECORD, status=S.COMPLETED)
    assert batch_calls._precheck(sw.BatchAction.CANCEL, ended)[0] is Out.ALREADY_ENDED
    asked = dataclasses.replace(RECORD, cancel_reason="earlier")
    assert batch_calls._precheck(sw.BatchAction.CANCEL, asked) == (Out.ALREADY_REQUESTED, "earlier")
    assert batch_calls._precheck(sw.BatchAction.TERMINATE, asked)[0] is Out.DONE
    assert batch_calls._precheck(sw.BatchAction.RETRY, RECORD)[0] is Out.NOT_SUSPENDED
