"""Issue 39's goals as `benchmarks.compare` prints them: the checks of goals 1, 3, 4, 5, 6 and 8
(`issue39_goals`) and goal 7's table (the single-cluster ceiling). Goal 2 (the compiled build)
is decided once, not per run: its numbers are in benchmarks/README.md.

Goal 1 divides Sagaway's CPU per workflow by minimal checkpointing's, over A_thr's measured
part: the scenario process plus, on PostgreSQL, the database server
(``measured_cpu.per_wf_ms``). Goal 3 takes `benchmarks.network`'s rows at 2 ms RTT, goal 4
`benchmarks.cli_start`'s medians, goal 6 A_thr through the Engine Server over A_thr embedded.

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
CPU_BAR = {"sqlite": 1.0, "postgres": 0.75}
"""Goal 1: Sagaway's CPU per workflow / minimal checkpointing's, at most, per backend."""
SERVER_BAR = 0.8
"""Goal 6: A_thr through the Engine Server / embedded, on PostgreSQL, at least."""
NEW_PEER = "absurd/postgres"
"""Goal 8's peer."""
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


def issue39_goals(
    results: report.Results,
    waiting_memory: dict[str, dict[str, Any]] | None = None,
    network_rows: list[dict[str, Any]] | None = None,
    cli: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Goals 1, 3, 4, 5, 6 and 8, each measured value against its bar (n/a if not run)."""
    found: list[dict[str, Any]] = []
    for backend, bar in CPU_BAR.items():
        report._add_goal(
            found,
            f"1. CPU per workflow ≤ {bar:g}x minimal checkpointing on {backend} "
            "(A_thr, measured part, process + database server)",
            report._quotient(
                report.cpu_per_wf(results, report.SAGAWAY[backend]),
                report.cpu_per_wf(results, f"checkpoint/{backend}"),
            ),
            bar,
            "x",
            higher=False,
        )
    found += network_goals(network_rows)
    found += cli_goals(cli)
    if waiting_memory:
        found += waiting_memory_goals(waiting_memory)
    else:
        for db in ("sqlite", "postgres"):
            report._add_goal(
                found,
                f"5. worker RSS with 1,000,000 / 10,000 WAITING ≤ {WAITING_RATIO_BAR:g}x on {db}",
                None,
                WAITING_RATIO_BAR,
                "x",
                higher=False,
            )
    report._add_goal(
        found,
        f"6. A_thr through the Engine Server ≥ {SERVER_BAR:g}x embedded on PostgreSQL",
        report._quotient(
            report.metric(results, "sagaway/grpc+postgres", "A_thr"),
            report.metric(results, report.SAGAWAY["postgres"], "A_thr"),
        ),
        SERVER_BAR,
        "x",
    )
    for name in ("A_seq", "A_thr", "B_thr"):
        report._add_goal(
            found,
            f"8. Sagaway on PostgreSQL ahead of absurd, {name} (ratio > 1)",
            report.ratio(results, report.SAGAWAY["postgres"], NEW_PEER, name),
            1.0,
            "x",
        )
    return found


def network_goals(rows: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Goal 3 from `benchmarks.network`'s rows: the two ratios at 2 ms RTT."""
    from benchmarks import network

    row = next((r for r in rows or [] if r["rtt_ms"] == network.GOAL_RTT), None)
    found: list[dict[str, Any]] = []
    report._add_goal(
        found,
        f"3. A_thr ≥ {network.GOAL_THR:g}x minimal checkpointing, PostgreSQL at "
        f"{network.GOAL_RTT:g} ms RTT",
        None if row is None else row.get("thr_ratio"),
        network.GOAL_THR,
        "x",
    )
    report._add_goal(
        found,
        f"3. A_seq p50 ≤ {network.GOAL_P50:g}x minimal checkpointing's, PostgreSQL at "
        f"{network.GOAL_RTT:g} ms RTT",
        None if row is None else row.get("p50_ratio"),
        network.GOAL_P50,
        "x",
        higher=False,
    )
    return found


def cli_goals(record: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Goal 4 from `benchmarks.cli_start`'s record: median wall ms of list and show, per
    backend."""
    from benchmarks.cli_start import GOAL_MS

    wall = (record or {}).get("wall", {})
    found: list[dict[str, Any]] = []
    for backend, bar in GOAL_MS.items():
        for command in ("list", "show KEY"):
            value = wall.get(f"{command} {backend}", {}).get("median_ms")
            report._add_goal(
                found,
                f"4. `sagaway {command}` end to end ≤ {bar:g} ms on {backend} (median)",
                value,
                bar,
                " ms",
                higher=False,
            )
    return found


def waiting_memory_goals(runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Goal 5 per database: ``runs`` maps a database to `benchmarks.waiting_memory`'s
    summary (``runs`` and ``steady_ratio``)."""
    found: list[dict[str, Any]] = []
    for db, summary in runs.items():
        ns = sorted(r["n"] for r in summary.get("runs", []))
        what = f"{ns[-1]:,} / {ns[0]:,}" if len(ns) >= 2 else "large / small N"
        report._add_goal(
            found,
            f"5. worker RSS with {what} WAITING ≤ {WAITING_RATIO_BAR:g}x on {db}",
            summary.get("steady_ratio"),
            WAITING_RATIO_BAR,
            "x",
            higher=False,
        )
    return found
