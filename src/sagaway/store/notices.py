"""Notices: the wake-ups that tell a process to look again, as typed messages.

A notice says "something changed, look": it carries no state of its own, so one that is lost
costs a poll, never a wrong answer. They come from PostgreSQL's triggers (LISTEN/NOTIFY, the
payloads written by ``store/migrations/postgres``), from the Engine Server's ``Watch`` stream
(``pb.Notice.payload``, the same text), and from the stores themselves when they say whether
notices flow. This module is the only place that writes or reads their text; everything else
passes the dataclasses below.

The text is ``<kind>:<detail>``, fixed by the triggers (so by the database, not by this
code: changing it needs a migration):

============================  =================================================================
``ready:``                    work may be due (PostgreSQL merges the repeats of a transaction,
                              so it carries nothing; the trigger of schema 3 sent a time, which
                              is read and dropped)
``ended:<run_id>``            an execution ended (COMPLETED, FAILED, CANCELLED or TERMINATED)
``cancel:<run_id>``           a cancel was requested of a live execution
``schedules:``                a schedule was put, paused or resumed
``published:<run_id>``        an execution published events or stream items (schema v24)
``listening:`` / ``deaf:``    the store's notices flow (again: anything sent while they did
                              not was lost, so look at everything) / stopped flowing
``listening:ends``            the same, of a store's stream of every execution's ends and
/ ``deaf:ends``               cancel requests (PostgreSQL's second listener)
``probe:<token>``             a PostgreSQL listener's test of its own connection; never passed on
============================  =================================================================

``decode`` returns None for a text it cannot read (an unknown kind, from a newer Sagaway, or a
malformed one) and logs it: a notice is a hint, and a process must not stop hearing the others
for want of one.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Literal, TypeAlias

logger = logging.getLogger(__name__)

Stream: TypeAlias = Literal["", "ends"]
"""Which of a store's notices a ``Listening``/``Deaf`` speaks of: "" all of them (or all but
the ends, once a store reports those apart), "ends" every execution's ends and cancels."""
_STREAMS: tuple[Stream, ...] = ("", "ends")


@dataclasses.dataclass(frozen=True, slots=True)
class Ready:
    """Work may be due: claimers look."""


@dataclasses.dataclass(frozen=True, slots=True)
class RunNotice:
    """A notice about one execution, ``run_id`` (its kind is its class)."""

    run_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class Ended(RunNotice):
    """The execution ``run_id`` ended: its waiters read it, its runner (if any) stops."""


@dataclasses.dataclass(frozen=True, slots=True)
class CancelRequested(RunNotice):
    """A cancel was requested of the execution ``run_id``: its runner reads the reason."""


@dataclasses.dataclass(frozen=True, slots=True)
class SchedulesChanged:
    """A schedule's definition changed: schedulers look again."""


@dataclasses.dataclass(frozen=True, slots=True)
class Published(RunNotice):
    """The execution ``run_id`` published events or stream items: its readers look."""


@dataclasses.dataclass(frozen=True, slots=True)
class Listening:
    """The notices of ``stream`` flow (again): what was sent before may be lost, look again."""

    stream: Stream = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Deaf:
    """The notices of ``stream`` stopped flowing: poll until ``Listening`` comes."""

    stream: Stream = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Probe:
    """A listener's test of its connection: sent to itself, recognised by ``token``."""

    token: str


Notice: TypeAlias = (
    Ready | Ended | CancelRequested | SchedulesChanged | Published | Listening | Deaf | Probe
)
Callback: TypeAlias = Callable[[Notice], None]
"""What a store's ``listen`` calls with each notice."""

READY = Ready()
SCHEDULES_CHANGED = SchedulesChanged()

_KINDS: dict[type[Notice], str] = {
    Ready: "ready",
    Ended: "ended",
    CancelRequested: "cancel",
    SchedulesChanged: "schedules",
    Published: "published",
    Listening: "listening",
    Deaf: "deaf",
    Probe: "probe",
}
_MAX_LOGGED = 32
"""Distinct unreadable kinds logged as warnings; past that, at debug level (bounded memory)."""
_logged: set[str] = set()


def encode(notice: Notice) -> str:
    """The text of ``notice``, as the triggers write it."""
    match notice:
        case Ended(detail) | CancelRequested(detail) | Published(detail) | Probe(detail):
            pass
        case Listening(detail) | Deaf(detail):
            pass
        case _:
            detail = ""
    return f"{_KINDS[type(notice)]}:{detail}"


def decode(payload: str) -> Notice | None:
    """The notice ``payload`` is, or None (logged) if it is not one this Sagaway knows."""
    kind, colon, detail = payload.partition(":")
    notice: Notice | None = None
    if colon:
        match kind:
            case "ready":
                notice = READY  # a schema-3 trigger's time is ignored: "look" is all it says
            case "schedules" if not detail:
                notice = SCHEDULES_CHANGED
            case "ended" if detail:
                notice = Ended(detail)
            case "cancel" if detail:
                notice = CancelRequested(detail)
            case "published" if detail:
                notice = Published(detail)
            case "listening" | "deaf" if detail in _STREAMS:
                stream: Stream = "ends" if detail else ""
                notice = Listening(stream) if kind == "listening" else Deaf(stream)
            case "probe" if detail:
                notice = Probe(detail)
    if notice is None:
        _unreadable(payload, kind if colon else "")
    return notice


def _unreadable(payload: str, kind: str) -> None:
    shown = payload if len(payload) <= 80 else payload[:77] + "..."
    first = kind not in _logged and len(_logged) < _MAX_LOGGED
    if first:
        _logged.add(kind)
    logger.log(
        logging.WARNING if first else logging.DEBUG,
        "ignoring a notice this Sagaway cannot read: %r (a newer version's, or not Sagaway's)",
        shown,
        extra={"action": "notice_ignored"},
    )
