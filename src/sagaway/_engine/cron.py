"""Cron expressions read in a time zone: checking them and finding their ticks.

The expressions are evaluated by ``cronsim`` (no dependencies; it follows Debian's cron, whose
handling of daylight-saving changes is documented and stable): 5 fields (minute hour
day-of-month month day-of-week), or 6 with a seconds field first. In a zone with daylight
saving, a job at a fixed local time that falls in the hour skipped in spring runs at the first
valid minute after the jump, and one in the hour repeated in autumn runs once (its first
occurrence); jobs that run more often than hourly follow the wall clock.

Ticks are epoch seconds (whole seconds), so the engine compares and stores plain numbers.
"""

from __future__ import annotations

import datetime
import zoneinfo

from cronsim import CronSim, CronSimError

CATCH_UP_POLICIES = ("skip", "one", "all")
"""What runs of the ticks missed while no scheduler ran (see ``docs/schedules.md``)."""
MAX_CATCH_UP = 1000
"""``catch_up="all"`` runs at most this many missed ticks (the latest ones, oldest first)."""

_FIELDS = "minute hour day-of-month month day-of-week"


def zone(timezone: str) -> zoneinfo.ZoneInfo:
    """The IANA time zone ``timezone`` (``ValueError`` naming it if there is none)."""
    if not isinstance(timezone, str) or not timezone:
        raise ValueError(f"a schedule's timezone is an IANA name such as 'UTC', not {timezone!r}")
    try:
        return zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {timezone!r}: use an IANA name such as 'UTC' or 'Europe/Paris'"
        ) from None


def check(cron: str, timezone: str, catch_up: str) -> None:
    """Refuse (``ValueError``) an expression cron cannot read, saying which field is wrong, an
    unknown time zone, or a catch-up policy other than skip, one or all."""
    if catch_up not in CATCH_UP_POLICIES:
        raise ValueError(f"catch_up must be one of 'skip', 'one' or 'all', not {catch_up!r}")
    tz = zone(timezone)
    if not isinstance(cron, str):
        raise ValueError(f"a cron expression is a string, not {cron!r}")
    fields = len(cron.split())
    if fields not in (5, 6):
        raise ValueError(
            f"invalid cron expression {cron!r}: {fields} fields; expected 5 ({_FIELDS}) "
            "or 6 (a seconds field first)"
        )
    try:
        next(CronSim(cron, datetime.datetime.now(tz)))
    except (CronSimError, ValueError, StopIteration) as exc:
        detail = str(exc) or "it never fires"
        raise ValueError(
            f"invalid cron expression {cron!r}: {detail.lower()} field "
            f"(fields: {'second ' if fields == 6 else ''}{_FIELDS})"
            if detail.startswith("Bad ")
            else f"invalid cron expression {cron!r}: {detail}"
        ) from None


def next_tick(cron: str, timezone: str, after: float) -> float:
    """The first tick strictly after ``after``."""
    start = datetime.datetime.fromtimestamp(after, zone(timezone))
    return next(CronSim(cron, start)).timestamp()


def ticks_between(cron: str, timezone: str, since: float, until: float, limit: int) -> list[float]:
    """The ticks at or after ``since`` and at or before ``until``, oldest first: the latest
    ``limit`` of them when there are more (found backwards from ``until``, so a long gap costs
    ``limit`` steps, not one per tick missed)."""
    # A microsecond past ``until``, so that a tick exactly at ``until`` counts (see CronSim).
    start = datetime.datetime.fromtimestamp(until, zone(timezone)) + datetime.timedelta(
        microseconds=1
    )
    found: list[float] = []
    for tick in CronSim(cron, start, reverse=True):
        at = tick.timestamp()
        if at < since or len(found) >= limit:
            break
        if at <= until:
            found.append(at)
    found.reverse()
    return found


def label(tick: float) -> str:
    """A tick as a UTC ISO 8601 time, as it appears in execution keys."""
    moment = datetime.datetime.fromtimestamp(tick, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
