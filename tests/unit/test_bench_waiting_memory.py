"""benchmarks.waiting_memory: the copies of the engine's rows for a wait, and the ratio."""

from __future__ import annotations

import datetime

from benchmarks import waiting_memory as wm

from sagaway import serialization

TIMER = {
    "run_id": "01a247e97109d3c55ffbcf2c47a7a27c",
    "key": "t-00000000",
    "key_space": "t-00000000",
    "name": "bench.wait_timer",
    "args": '{"n":0}',
    "args_hash": "x",
    "status": "WAITING",
    "waiting_for": "timer",
    "next_run_at": 100.0,
    "created_at": 1.0,
}
SLEEP = {
    "run_id": TIMER["run_id"],
    "call_id": "1",
    "kind": "sleep",
    "status": "COMPLETED",
    "result": "100.0",
    "ended_at": 100.0,
}


def test_a_copy_changes_only_what_differs_per_workflow() -> None:
    row, steps = wm.copy_rows(TIMER, [SLEEP], "t", 7, 5_000.5)
    assert row["run_id"] != TIMER["run_id"] and len(row["run_id"]) == 32
    assert row["key"] == row["key_space"] == "t-00000007"
    assert row["args"] == '{"n":7}'
    assert row["args_hash"] == serialization.args_hash('{"n":7}')
    assert row["next_run_at"] == 5_000.5
    unchanged = {"name", "status", "waiting_for", "created_at"}
    assert {k: row[k] for k in unchanged} == {k: TIMER[k] for k in unchanged}
    assert steps == [{**SLEEP, "run_id": row["run_id"], "result": "5000.5", "ended_at": 5_000.5}]


def test_a_signal_wait_keeps_its_wake_up_empty_and_times_keep_their_type() -> None:
    template = {**TIMER, "key": "s-00000000", "waiting_for": "signal:approval", "next_run_at": None}
    row, _ = wm.copy_rows(template, [], "s", 3, 9.0)
    assert row["next_run_at"] is None and row["key"] == "s-00000003"
    as_datetime = datetime.datetime.fromtimestamp(100.0, tz=datetime.UTC)
    copied, _ = wm.copy_rows({**TIMER, "next_run_at": as_datetime}, [], "t", 1, 200.0)
    assert copied["next_run_at"] == datetime.datetime.fromtimestamp(200.0, tz=datetime.UTC)


def test_all_copies_make_n_with_the_two_templates_and_timers_in_the_future() -> None:
    templates = {"t": (TIMER, [SLEEP]), "s": ({**TIMER, "next_run_at": None}, [])}
    copies = list(wm.all_copies(templates, 11, now=1_000.0))
    assert len(copies) == 11 - 2
    keys = [row["key"] for row, _ in copies]
    assert keys == [f"t-{i:08d}" for i in range(1, 5)] + [f"s-{i:08d}" for i in range(1, 6)]
    wakes = [row["next_run_at"] for row, _ in copies[:4]]
    assert all(1_000.0 + wm.DAY < w < 1_000.0 + 30 * wm.DAY for w in wakes)
    assert len({row["run_id"] for row, _ in copies}) == 9


def test_the_ratio_is_largest_n_over_smallest() -> None:
    runs = [{"n": 1_000_000, "rss_steady_mb": 55.0}, {"n": 10_000, "rss_steady_mb": 50.0}]
    assert wm.ratio(runs) == 1.1
    assert wm.ratio(runs[:1]) is None
