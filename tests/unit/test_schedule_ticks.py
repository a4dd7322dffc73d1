"""Tick computation of schedules: daylight-saving days in Europe/Paris as cronsim documents
them (Debian cron's rules), backward search agreeing with forward, catch-up plans, keys."""

from __future__ import annotations

import datetime
import zoneinfo

from sagaway._engine import cron
from sagaway.schedules.ticks import plan, tick_key
from sagaway.store.records import ScheduleRecord

PARIS = zoneinfo.ZoneInfo("Europe/Paris")


def local(*fields: int) -> float:
    return datetime.datetime(*fields, tzinfo=PARIS).timestamp()  # type: ignore[misc]


def ticks_from(expr: str, start: float, n: int) -> list[str]:
    out, at = [], start
    for _ in range(n):
        at = cron.next_tick(expr, "Europe/Paris", at)
        out.append(datetime.datetime.fromtimestamp(at, PARIS).isoformat())
    return out


def test_daily_0230_across_spring_forward() -> None:
    # 2026-03-29: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist that day. A fixed-time
    # job due in the skipped hour runs right after the jump (03:00), once.
    assert ticks_from("30 2 * * *", local(2026, 3, 27, 12), 4) == [
        "2026-03-28T02:30:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]


def test_daily_0230_across_fall_back() -> None:
    # 2026-10-25: 03:00 CEST goes back to 02:00 CET, so 02:30 comes twice. It runs once, at
    # its first occurrence (CEST).
    assert ticks_from("30 2 * * *", local(2026, 10, 23, 12), 4) == [
        "2026-10-24T02:30:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
        "2026-10-27T02:30:00+01:00",
    ]
    # In UTC: 23.5 hours from the tick before the jump to the one after it (02:30 CET to
    # 03:00 CEST); 25 hours across the fall back (02:30 CEST to 02:30 CET).
    spring = [cron.next_tick("30 2 * * *", "Europe/Paris", local(2026, 3, d, 12)) for d in (27, 28)]
    autumn = [
        cron.next_tick("30 2 * * *", "Europe/Paris", local(2026, 10, d, 12)) for d in (24, 25)
    ]
    assert spring[1] - spring[0] == 23.5 * 3600
    assert autumn[1] - autumn[0] == 25 * 3600


def test_backward_search_agrees_with_forward() -> None:
    for start in (local(2026, 3, 20, 12), local(2026, 10, 20, 12)):
        forward, at = [], start
        for _ in range(14):
            at = cron.next_tick("30 2 * * *", "Europe/Paris", at)
            forward.append(at)
        assert cron.ticks_between("30 2 * * *", "Europe/Paris", forward[0], forward[-1], 100) == (
            forward
        )
        assert (
            cron.ticks_between("30 2 * * *", "Europe/Paris", forward[0], forward[-1], 3)
            == (forward[-3:])
        )


def schedule(catch_up: str, next_tick_at: float, expr: str = "* * * * * *") -> ScheduleRecord:
    return ScheduleRecord(
        id="s",
        workflow="job",
        args="{}",
        queue="default",
        cron=expr,
        timezone="UTC",
        catch_up=catch_up,
        paused=False,
        next_tick_at=next_tick_at,
        created_at=0.0,
        updated_at=0.0,
    )


def test_catch_up_plans() -> None:
    t0 = 1_750_000_000.0
    # Ticks t0+10 .. t0+100 came well before the scheduler started at t0+105.5.
    every_10s = "*/10 * * * * *"
    missed = [t0 + 10 * k for k in range(1, 11)]
    for policy, ticks in (("skip", []), ("one", missed[-1:]), ("all", missed)):
        chosen = plan(schedule(policy, t0 + 10, every_10s), now=t0 + 105.5, started_at=t0 + 105.5)
        assert (chosen.ticks, chosen.next_tick_at) == (ticks, t0 + 110), policy
    # A tick just before the scheduler started is not missed: another one was about to fire it.
    joining = plan(schedule("skip", t0 + 10, every_10s), now=t0 + 12, started_at=t0 + 12)
    assert joining.ticks == [t0 + 10]
    # A running scheduler that is a little late runs every due tick, whatever the policy.
    late = plan(schedule("skip", t0 + 1), now=t0 + 3.2, started_at=t0)
    assert late.ticks == [t0 + 1, t0 + 2, t0 + 3]
    # ... but ticks more than a minute late count as missed.
    stalled = plan(schedule("one", t0 + 1), now=t0 + 100.5, started_at=t0)
    # (t0+1 .. t0+40 missed: the latest of them; t0+41 .. t0+100 late but not missed.)
    assert stalled.ticks == [t0 + k for k in range(40, 101)]
    # "all" is bounded: the latest MAX_CATCH_UP missed ticks, oldest first.
    bounded = plan(schedule("all", t0 + 1), now=t0 + 5000.5, started_at=t0 + 6000)
    assert len(bounded.ticks) == cron.MAX_CATCH_UP
    assert (bounded.ticks[0], bounded.ticks[-1]) == (t0 + 4001, t0 + 5000)


def test_tick_keys_are_utc() -> None:
    assert tick_key("nightly", local(2026, 3, 29, 3, 0)) == "schedule:nightly:2026-03-29T01:00:00Z"
