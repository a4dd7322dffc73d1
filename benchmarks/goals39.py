"""Issue 39's goals 5 (WAITING costs no memory) and 7 (the single-cluster ceiling), as
`benchmarks.compare` prints them.

Goal 7's figure is the PostgreSQL server's CPU per workflow over A_thr's measured part: the
CPU of the benchmark database's backends (``measured_cpu.db_backends_s``, each backend's
/proc CPU at ``MEASURE_END`` minus at ``MEASURE_BEGIN``), so other databases' clients on a
shared server do not count. The services' tables (WORKLOAD.md §2) live in the same database;
``none/postgres`` runs the same services without an engine, so an engine's own share is its
figure minus that one's. The projection divides a 96-vCPU server's CPU by the engine's share:
the rate at which that server's CPU, and nothing else, would be used up.
"""

from __future__ import annotations

from typing import Any

from benchmarks import report

WAITING_RATIO_BAR = 1.2
"""RSS with the large N of WAITING workflows / RSS with the small N (goal 5)."""
ANCHOR_VCPUS = 96
ANCHOR_WF_S = 43_000.0
"""DBOS's published figure: workflows per second on one 96-vCPU PostgreSQL."""
ENGINES = ("sagaway/postgres", "dbos/postgres", "checkpoint/postgres")
SERVICES_ONLY = "none/postgres"


def server_ms_per_wf(results: report.Results, key: str) -> float | None:
    """ms of the benchmark database's backends' CPU per workflow, A_thr's measured part."""
    r = results.get(key, {}).get("A_thr")
    if not report.ok(r):
        return None
    assert r is not None
    value = (r.get("measured_cpu") or {}).get("db_backends_per_wf_ms")
    return None if value is None else float(value)


def projected_wf_s(engine_ms: float | None) -> float | None:
    """Workflows per second at which ``ANCHOR_VCPUS`` cores are all busy, at ``engine_ms`` of
    server CPU per workflow (linear scaling, nothing else in the way)."""
    if engine_ms is None or engine_ms <= 0:
        return None
    return ANCHOR_VCPUS * 1000.0 / engine_ms


def server_cpu_rows(results: report.Results) -> list[dict[str, Any]]:
    """Per engine: server CPU per workflow with the services, without them, the projection."""
    services = server_ms_per_wf(results, SERVICES_ONLY)
    rows = []
    for key in ENGINES:
        total = server_ms_per_wf(results, key)
        if total is None:
            continue
        engine = None if services is None else total - services
        rows.append(
            {
                "key": key,
                "server_ms_per_wf": total,
                "engine_ms_per_wf": engine,
                "projected_wf_s": projected_wf_s(engine),
                "projected_with_services_wf_s": projected_wf_s(total),
            }
        )
    return rows


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def server_cpu_lines(results: report.Results) -> list[str]:
    """Goal 7's table (markdown), empty if no engine ran on PostgreSQL with the measure."""
    rows = server_cpu_rows(results)
    if not rows:
        return []
    services = server_ms_per_wf(results, SERVICES_ONLY)
    lines = [
        "#### PostgreSQL server CPU per workflow (issue 39 goal 7)",
        "",
        "| target | server CPU ms/wf (engine + services) | engine's share ms/wf | "
        f"projected wf/s on {ANCHOR_VCPUS} vCPUs (engine) | with the services |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| `{row['key']}` | {_fmt(row['server_ms_per_wf'])} | "
            f"{_fmt(row['engine_ms_per_wf'])} | {_fmt(row['projected_wf_s'], 0)} | "
            f"{_fmt(row['projected_with_services_wf_s'], 0)} |"
        )
    lines += [
        "",
        f"Services alone (`{SERVICES_ONLY}`): {_fmt(services)} ms/wf. Projection = "
        f"{ANCHOR_VCPUS} x 1000 ms / (ms per workflow): all cores busy, linear scaling, no "
        f"lock, WAL or I/O limit; DBOS publishes {ANCHOR_WF_S:,.0f} wf/s on such a server "
        "(its own workload, not this one).",
        "",
    ]
    return lines


def waiting_memory_goals(runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Goal 5 per database: ``runs`` maps a database to `benchmarks.waiting_memory`'s
    summary (``runs`` and ``steady_ratio``)."""
    found: list[dict[str, Any]] = []
    for db, summary in runs.items():
        ns = sorted(r["n"] for r in summary.get("runs", []))
        what = f"{ns[-1]:,} / {ns[0]:,}" if len(ns) >= 2 else "large / small N"
        report._add_goal(
            found,
            f"worker RSS with {what} WAITING ≤ {WAITING_RATIO_BAR:g}x on {db}",
            summary.get("steady_ratio"),
            WAITING_RATIO_BAR,
            "x",
            higher=False,
        )
    return found
