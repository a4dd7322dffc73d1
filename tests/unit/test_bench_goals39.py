"""benchmarks.goals39 (issue 39 goals 5 and 7) and the measured part's backend CPU."""

from __future__ import annotations

from typing import Any

from benchmarks import goals39, orchestrate


def _thr(db_ms: float) -> dict[str, Any]:
    return {"A_thr": {"measured_cpu": {"db_backends_per_wf_ms": db_ms}}}


def test_the_engine_share_is_its_figure_minus_the_services_alone_and_projects_to_96_vcpus() -> None:
    results = {
        "sagaway/postgres": _thr(1.5),
        "dbos/postgres": _thr(4.5),
        "none/postgres": _thr(0.5),
    }
    rows = {r["key"]: r for r in goals39.server_cpu_rows(results)}
    assert set(rows) == {"sagaway/postgres", "dbos/postgres"}
    assert rows["sagaway/postgres"]["engine_ms_per_wf"] == 1.0
    assert rows["sagaway/postgres"]["projected_wf_s"] == 96_000.0
    assert rows["dbos/postgres"]["projected_wf_s"] == 24_000.0
    assert rows["dbos/postgres"]["projected_with_services_wf_s"] == 96_000.0 / 4.5
    lines = goals39.server_cpu_lines(results)
    assert "| `sagaway/postgres` | 1.500 | 1.000 | 96,000 | 64,000 |" in lines
    assert goals39.server_cpu_lines({}) == []


def test_without_the_services_run_there_is_no_engine_share() -> None:
    (row,) = goals39.server_cpu_rows({"sagaway/postgres": _thr(1.5)})
    assert row["engine_ms_per_wf"] is None and row["projected_wf_s"] is None


def test_goal_5_is_met_within_1_2x() -> None:
    runs = [{"n": 10_000}, {"n": 1_000_000}]
    goals = goals39.waiting_memory_goals(
        {
            "sqlite": {"runs": runs, "steady_ratio": 1.05},
            "postgres": {"runs": runs, "steady_ratio": 1.31},
        }
    )
    assert [g["met"] for g in goals] == [True, False]
    assert goals[0]["goal"] == "worker RSS with 1,000,000 / 10,000 WAITING ≤ 1.2x on sqlite"


def test_backend_cpu_counts_the_measured_part_of_backends_alive_at_its_end() -> None:
    at = {
        "MEASURE_BEGIN": {10: 1.0, 11: 2.0, 12: 0.5},  # 12 disconnects before the end
        "MEASURE_END": {10: 1.5, 11: 2.25, 13: 0.25},  # 13 connected meanwhile
    }
    found = orchestrate.db_backends(at, 1000)
    assert found == {
        "db_backends_s": 1.0,
        "db_backends_per_wf_ms": 1.0,
        "db_backends_lost": 1,
    }
    assert orchestrate.db_backends({}, 10) == {}
