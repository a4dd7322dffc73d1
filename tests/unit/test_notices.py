"""``sagaway.store.notices``: every kind round-trips through its text, the texts are the ones
the PostgreSQL triggers write (checked against the database in
tests/integration/test_postgres_notice_texts.py), and a text that is not a notice this
Sagaway knows is dropped with a log line, never an exception."""

from __future__ import annotations

import logging
import typing

import pytest

from sagaway.store import notices
from sagaway.store.notices import (
    CancelRequested,
    Deaf,
    Ended,
    Listening,
    Notice,
    Probe,
    Published,
    Ready,
    SchedulesChanged,
)

TEXTS: list[tuple[str, Notice]] = [
    ("ready:", Ready()),
    ("ended:0123abcd", Ended("0123abcd")),
    ("ended:a:b/ü", Ended("a:b/ü")),  # only the first colon separates the kind
    ("cancel:0123abcd", CancelRequested("0123abcd")),
    ("schedules:", SchedulesChanged()),
    ("listening:", Listening()),
    ("listening:ends", Listening("ends")),
    ("deaf:", Deaf()),
    ("deaf:ends", Deaf("ends")),
    ("probe:5f1e", Probe("5f1e")),
    ("published:0123abcd", Published("0123abcd")),
]


def test_every_kind_is_covered_here() -> None:
    assert {type(n) for _, n in TEXTS} == set(typing.get_args(Notice))


@pytest.mark.parametrize(("text", "notice"), TEXTS, ids=[t for t, _ in TEXTS])
def test_each_kind_round_trips_through_its_exact_text(text: str, notice: Notice) -> None:
    assert notices.encode(notice) == text
    assert notices.decode(text) == notice
    assert notices.decode(notices.encode(notice)) == notice


def test_notices_are_values() -> None:
    """Frozen and compared by value: a waiter matches ``Ended(run_id)`` with ``==``."""
    assert Ended("r") == Ended("r") != Ended("s")
    assert Ready() == notices.READY
    with pytest.raises(AttributeError):
        Ended("r").run_id = "s"  # type: ignore[misc]


def test_the_schema_3_ready_with_a_time_is_still_ready() -> None:
    """Migration 0003's trigger sent 'ready:<next_run_at>'; the time never mattered."""
    assert notices.decode("ready:1750000000.5") == notices.READY


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ready",  # no colon
        "ended:",  # no run id
        "cancel:",
        "probe:",
        "schedules:x",
        "listening:runs",  # an unknown stream
        "deaf:ENDS",
        "started:r1",  # an unknown kind (a newer Sagaway's)
        "x" * 10_000,
    ],
)
def test_what_is_not_a_notice_is_dropped_with_a_log_line(
    text: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="sagaway.store.notices")
    assert notices.decode(text) is None
    [record] = [r for r in caplog.records if r.name == "sagaway.store.notices"]
    assert "ignoring a notice this Sagaway cannot read" in record.getMessage()
    assert len(record.getMessage()) < 200  # a long text is shortened
    assert getattr(record, "action", None) == "notice_ignored"
