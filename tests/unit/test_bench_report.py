"""The benchmark harness's pure parts: issue 19's goal checks, the chart, the preload's plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks import chart, compare, history, preload, report


def _run(thr: float | None = None, p50: float | None = None, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "wrong_results": 0,
        "errors": 0,
        "service_check": {"ok": True},
        **extra,
    }
    if thr is not None:
        record["throughput_wf_s"] = thr
    if p50 is not None:
        record["latency_ms"] = {"p50": p50}
    return record


def _history(list_ms: float, scan_ms: float) -> dict[str, Any]:
    cli = {w: {"beyond_start_ms": list_ms} for w in ("list_status", "list_name", "show")}
    return {"cli": cli, "scan": {"claim_due_ms": scan_ms, "next_due_ms": 0.1, "runs": 20}}


def _results(sagaway_thr: float, preload_thr: float, per_wf_3: float) -> report.Results:
    return {
        "sagaway/sqlite": {
            "A_seq": _run(p50=1.0),
            "A_thr": _run(sagaway_thr),
            "B_thr": _run(sagaway_thr),
        },
        "checkpoint/sqlite": {"A_seq": _run(p50=1.0), "A_thr": _run(1000), "B_thr": _run(1000)},
        "dbos/sqlite": {"A_seq": _run(p50=10.0), "A_thr": _run(100), "B_thr": _run(100)},
        "sagaway/sqlite-preload": {
            "A_thr": _run(preload_thr, preload={"n": 1000}, history=_history(20.0, 2.0))
        },
        "sagaway/postgres-1worker": {"A_thr": _run(500, measured_cpu={"per_wf_ms": 2.0})},
        "sagaway/postgres-3proc": {"A_thr": _run(600, measured_cpu={"per_wf_ms": per_wf_3})},
    }


def _by_goal(items: list[dict[str, Any]]) -> dict[str, bool | None]:
    return {g["goal"]: g["met"] for g in items}


def _find(items: dict[str, bool | None], *words: str) -> bool | None:
    (match,) = [met for goal, met in items.items() if all(w in goal for w in words)]
    return match


def test_issue19_goals_met_and_missed() -> None:
    good = _by_goal(report.issue19_goals(_results(1300, 1200, 2.2), {"n": 100000,
                    "worker_rss_while_waiting_mb": 80.0}))  # fmt: skip
    assert _find(good, "A_thr ≥ 1.2x minimal checkpointing on sqlite") is True
    assert _find(good, "A_seq p50 ≤ 1.3x", "sqlite") is True
    assert _find(good, "preloaded ≥", "sqlite") is True  # 1200 / 1300 = 0.92
    assert _find(good, "list --status", "sqlite") is True
    assert _find(good, "lease scan", "sqlite") is True
    assert _find(good, "CPU per workflow") is True  # 2.2 / 2.0 = 1.1
    assert _find(good, "WAITING") is True
    assert _find(good, "ahead of every peer on sqlite, A_thr") is True
    # nothing measured: n/a, never met
    assert _find(good, "A_thr ≥ 1.5x minimal checkpointing on postgres") is None
    assert _find(good, "Engine Server") is None

    bad = _by_goal(report.issue19_goals(_results(1100, 900, 2.4)))
    assert _find(bad, "A_thr ≥ 1.2x minimal checkpointing on sqlite") is False  # 1.1x
    assert _find(bad, "preloaded ≥", "sqlite") is False  # 900 / 1100 = 0.82
    assert _find(bad, "CPU per workflow") is False  # 1.2x
    assert _find(bad, "WAITING") is None


def test_goal_lines_say_met_or_missed() -> None:
    items = report.issue19_goals(_results(1300, 1000, 2.0))
    lines = report.goal_lines(items)
    assert len(lines) == len(items)
    assert any(line.endswith(": MET") for line in lines)
    assert any(line.endswith(": MISSED") for line in lines)  # preload 1000 / 1300 < 0.9
    slow = history.goal_lines(_history(60.0, 12.0))
    assert all(line.endswith("MISSED") for line in slow)
    assert all(line.endswith("MET") for line in history.goal_lines(_history(10.0, 1.0)))


def test_the_postgresql_driver_floor_is_reported_beside_the_cli_goals() -> None:
    probes = _history(60.0, 1.0)
    probes["cli"].update(interpreter_start_ms=150.0)
    probes["cli"]["driver_floor"] = {"median_ms": 41.5, "cpu_median_ms": 39.0}
    lines = history.goal_lines(probes, "postgres")
    floor = [line for line in lines if "the floor" in line]
    assert floor == [
        "postgres: of which psycopg's import, one connection and SELECT 1 (the floor): "
        "41.5 ms (CPU 39.0 ms)"
    ]
    assert sum(line.endswith("MISSED") for line in lines) == 3  # the floor is no goal
    record = {"preload": {"n": 1000, "load_s": 2.0}, "history": probes}
    notes = compare.history_notes({"sagaway/postgres-preload": {"A_thr": record}})
    assert "`SELECT 1` alone: 42 ms)" in notes[0]
    del probes["cli"]["driver_floor"]  # SQLite: no driver to import
    assert "SELECT 1" not in compare.history_notes({"k": {"A_thr": record}})[0]


def test_chart_writes_a_png(tmp_path: Path) -> None:
    doc = {
        "date": "2026-12-02",
        "labels": {"sagaway/sqlite": "Sagaway / SQLite", "dbos/sqlite": "DBOS / SQLite"},
        "results": _results(1300, 1200, 2.0),
    }
    out = chart.write(doc, tmp_path / "compare.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [r[0] for r in chart.rows(doc)] == ["Sagaway / SQLite", "DBOS / SQLite"]


def test_preload_plan_matches_its_counts() -> None:
    for n in (0, 1, 19, 20, 61, 1000):
        counted: dict[str, int] = {"COMPLETED": 0, "FAILED": 0, "CANCELLED": 0}
        for i in range(n):
            counted[preload.status_of(i)] += 1
        assert preload.expected_counts(n) == counted
    keys = {preload.key_of(i) for i in range(1000)}
    assert len(keys) == 1000
    assert preload.sample(1000)["key"] in keys


class _Server:
    """A server monitor whose CPU grows by 1.5 s between two snapshots."""

    def __init__(self) -> None:
        self.cpu = 10.0

    def snapshot(self) -> float:
        self.cpu += 1.5
        return self.cpu


def test_measured_cpu_counts_the_measured_part_only() -> None:
    from benchmarks.orchestrate import MeasuredCpu

    measured = MeasuredCpu([], [_Server()])
    assert measured.record(2.0, 100) is None  # no markers seen: nothing to report
    measured("MEASURE_BEGIN")
    measured("MEASURE_END")
    record = measured.record(2.0, 100)
    assert record is not None
    assert record["servers_s"] == 1.5
    assert record["total_s"] == 3.5
    assert record["per_wf_ms"] == 35.0
