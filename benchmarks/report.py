"""Tables, ratios and goal checks from the records of ``benchmarks.compare`` / ``benchmarks.run``.

Records: ``results[target_key][scenario] -> dict`` as written by ``benchmarks.orchestrate``.
"""

from __future__ import annotations

import math
from typing import Any

from benchmarks.sagaway_adapter import LEASE_TIMEOUT

Results = dict[str, dict[str, dict[str, Any]]]


def ok(record: dict[str, Any] | None) -> bool:
    return bool(record) and "failed" not in record  # type: ignore[operator]


def clean(record: dict[str, Any] | None) -> bool:
    """Ran, with no wrong result, no error and exact service tables."""
    if not ok(record):
        return False
    assert record is not None
    return (
        not record.get("wrong_results")
        and not record.get("errors")
        and bool(record.get("service_check", {}).get("ok"))
    )


def metric(results: Results, key: str, name: str) -> float | None:
    """A_seq -> p50 ms; A_thr / B_thr -> wf/s; C -> recovery s (spawn -> all done)."""
    record = results.get(key, {}).get(name)
    if not ok(record):
        return None
    assert record is not None
    if name == "A_seq":
        return float(record["latency_ms"]["p50"])
    if name in ("A_thr", "B_thr"):
        return float(record["throughput_wf_s"])
    if name == "C":
        value = record.get("recovery_s")
        return None if value is None else float(value)
    return None


def pick_median(records: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The run with the median primary metric (lower median); the others' values attached."""
    measured = [(value, r) for r in records if (value := _value(r, name)) is not None]
    if not measured:
        chosen = dict(records[0])
    else:
        measured.sort(key=lambda pair: pair[0])
        chosen = dict(measured[(len(measured) - 1) // 2][1])
    chosen["repeat_values"] = [_value(r, name) for r in records]
    chosen["repeat_failed"] = [r.get("failed") for r in records if "failed" in r]
    chosen["repeat_clean"] = [clean(r) for r in records]
    return chosen


def _value(record: dict[str, Any], name: str) -> float | None:
    return metric({"k": {name: record}}, "k", name)


def _range(record: dict[str, Any] | None, digits: int = 1) -> str:
    """`` (lo-hi)`` over the repeated runs, if there were several."""
    if not record:
        return ""
    values = [v for v in record.get("repeat_values", []) if v is not None]
    if len(record.get("repeat_values", [])) < 2 or not values:
        return ""
    failed = len(record["repeat_values"]) - len(values)
    text = f" ({min(values):.{digits}f}-{max(values):.{digits}f}"
    return text + (f", {failed} failed)" if failed else ")")


def _fmt(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.{digits}f}"


def _cpu(process: dict[str, Any] | None) -> float | None:
    if not process or process.get("cpu_user_s") is None:
        return None
    return float(process["cpu_user_s"]) + float(process["cpu_sys_s"])


def _mark(record: dict[str, Any] | None) -> str:
    if not ok(record):
        return " (FAILED)"
    if not clean(record) or not all(record.get("repeat_clean", [True])):  # type: ignore[union-attr]
        return " (!)"
    return ""


# ---------------------------------------------------------------------- tables


def summary_table(results: Results, labels: dict[str, str]) -> str:
    """One row per engine and backend, one column per scenario's headline figure (markdown)."""
    lines = [
        "| engine / backend | A_seq p50 ms | A_thr wf/s (N=1000, C=100) | B_thr wf/s | "
        "C recovery s (spawn → all done) | C READY → all done s | C re-executed effects |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, label in labels.items():
        if key not in results:
            continue
        rec = results[key]
        c = rec.get("C")
        if "C" not in rec:
            c_cells = ["n/a", "n/a", "n/a"]
        elif not ok(c):
            c_cells = ["FAILED", "—", "—"]
        else:
            assert c is not None
            c_cells = [
                _fmt(c.get("recovery_s")) + _range(c, 2) + _mark(c),
                _fmt(c.get("ready_to_done_s")),
                str(c.get("service_check", {}).get("reexecuted_effects", "—")),
            ]
        cells = [
            label,
            _headline(results, key, "A_seq", 2),
            _headline(results, key, "A_thr", 1),
            _headline(results, key, "B_thr", 1),
            *c_cells,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _headline(results: Results, key: str, scenario: str, digits: int) -> str:
    """A scenario's figure with its range and mark; n/a for one the target does not run (the
    preloaded targets run A_thr only)."""
    rec = results[key]
    if scenario not in rec:
        return "n/a"
    return (
        _fmt(metric(results, key, scenario), digits)
        + _range(rec.get(scenario), digits)
        + _mark(rec.get(scenario))
    )


def detail_table(results: Results, labels: dict[str, str]) -> str:
    """Every scenario: latency, checks, process and server CPU (markdown)."""
    lines = [
        "| engine / backend | scen. | N | C | wf/s | p50 ms | p90 ms | p99 ms | max ms | wrong | "
        "errors | service rows | re-exec | proc CPU s | proc RSS MB | server CPU s | "
        "server RSS MB | other CPU s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, label in labels.items():
        for name, r in results.get(key, {}).items():
            if not ok(r):
                lines.append(f"| {label} | {name} | FAILED: {r.get('failed', '?')} |" + " |" * 15)
                continue
            chk = r.get("service_check", {})
            proc = r.get("process", {})
            cpu = _cpu(proc)
            workers = r.get("worker_processes") or []
            if workers:
                cpu = (cpu or 0.0) + sum(_cpu(w) or 0.0 for w in workers)
            if name == "C":
                cpu = (cpu or 0.0) + (_cpu(r.get("phase1_process")) or 0.0)
            ext = r.get("external") or []
            server_cpu = sum(e.get("cpu_s") or 0.0 for e in ext) if ext else None
            server_rss = next((e.get("peak_rss_mb") for e in ext if e.get("peak_rss_mb")), None)
            lat = r.get("latency_ms") or {}
            n = r.get("n")
            clients = r.get("clients") if name != "C" else "—"
            cells = [
                label,
                name,
                str(n),
                str(clients),
                _fmt(r.get("throughput_wf_s")) if name != "C" else "—",
                _fmt(lat.get("p50"), 2),
                _fmt(lat.get("p90"), 2),
                _fmt(lat.get("p99"), 2),
                _fmt(lat.get("max"), 2),
                str(r.get("wrong_results", "—")),
                str(r.get("errors", "—")),
                f"{chk.get('rows')}/{chk.get('expected_rows')} {'ok' if chk.get('ok') else 'BAD'}",
                str(chk.get("reexecuted_effects", "—")),
                _fmt(cpu),
                _fmt(proc.get("peak_rss_mb"), 0),
                _fmt(server_cpu),
                _fmt(server_rss, 0),
                _fmt((r.get("machine_cpu") or {}).get("other_cpu_s")),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def crash_table(results: Results, labels: dict[str, str]) -> str:
    lines = [
        "| engine / backend | shipped at kill | "
        "rows at kill (orders/inventory/payments/shipping) | "
        "SUBMITTED → kill s | spawn → READY s | READY → all done s | spawn → all done s | "
        "re-executed effects (per step) | wrong | tables |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, label in labels.items():
        c = results.get(key, {}).get("C")
        if c is None:
            continue
        if not ok(c):
            lines.append(f"| {label} | FAILED: {c.get('failed')} |" + " |" * 8)
            continue
        rows = c.get("rows_at_kill", {})
        chk = c.get("service_check", {})
        per_step = ", ".join(f"{k} {v}" for k, v in chk.get("reexecuted_per_step", {}).items())
        cells = [
            label,
            f"{c.get('shipped_at_kill')}/{c.get('n')}",
            "/".join(
                str(rows.get(s, "?")) for s in ("orders", "inventory", "payments", "shipping")
            ),
            _fmt(c.get("phase1_submitted_to_kill_s"), 2),
            _fmt(c.get("spawn_to_ready_s"), 2),
            _fmt(c.get("ready_to_done_s"), 2),
            _fmt(c.get("recovery_s"), 2),
            f"{chk.get('reexecuted_effects')} ({per_step or 'none'})",
            str(c.get("wrong_results")),
            f"{chk.get('rows')}/{chk.get('expected_rows')} {'ok' if chk.get('ok') else 'BAD'}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------- ratios and goals

SAGAWAY = {"sqlite": "sagaway/sqlite", "postgres": "sagaway/postgres"}
PEERS = {
    "sqlite": ["dbos/sqlite", "dbos/sqlite-wal", "temporal/dev-server", "checkpoint/sqlite"],
    "postgres": [
        "dbos/postgres",
        "temporal/dev-server",
        "sayiir/postgres",
        "absurd/postgres",
        "checkpoint/postgres",
    ],
}


def ratio(results: Results, sagaway: str, peer: str, name: str) -> float | None:
    """> 1: Sagaway is better. Latency and recovery: peer / Sagaway; throughput: Sagaway / peer."""
    s, p = metric(results, sagaway, name), metric(results, peer, name)
    if s is None or p is None or s <= 0 or p <= 0:
        return None
    return p / s if name in ("A_seq", "C") else s / p


def ratio_table(results: Results, labels: dict[str, str]) -> str:
    lines = [
        "| Sagaway on | vs | A_seq p50 (peer p50 / Sagaway p50) | A_thr (Sagaway / peer) | "
        "B_thr (Sagaway / peer) | C recovery (peer s / Sagaway s) |",
        "|---|---|---|---|---|---|",
    ]
    for backend, sagaway in SAGAWAY.items():
        if sagaway not in results:
            continue
        for peer in PEERS[backend]:
            if peer not in results:
                continue
            cells = [
                labels.get(sagaway, sagaway),
                labels.get(peer, peer),
                *(
                    _x(ratio(results, sagaway, peer, name))
                    for name in ("A_seq", "A_thr", "B_thr", "C")
                ),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _x(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}x" if value < 10 else f"{value:.0f}x"


def _add_goal(
    found: list[dict[str, Any]],
    goal: str,
    value: float | None,
    bar: float,
    unit: str,
    higher: bool = True,
) -> None:
    """Append ``goal`` with its measured ``value`` against ``bar`` (met or missed) to ``found``."""
    if value is None:
        found.append({"goal": goal, "value": None, "bar": bar, "met": None, "detail": "n/a"})
        return
    met = value >= bar if higher else value <= bar
    digits = 2 if unit else 3
    if higher:
        detail = f"{value:.{digits}f}{unit} vs ≥ {bar:.3g}{unit}: " + (
            f"met ({value / bar:.2f}x the bar)" if met else f"missed by {bar / value:.2f}x"
        )
    else:
        detail = f"{value:.{digits}f}{unit} vs ≤ {bar:.3g}{unit}: " + (
            f"met ({bar - value:.2f}{unit} to spare)"
            if met
            else f"missed by {value - bar:.2f}{unit}"
        )
    found.append({"goal": goal, "value": value, "bar": bar, "met": met, "detail": detail})


def goals(results: Results) -> list[dict[str, Any]]:
    """The performance goals of ``benchmarks/WORKLOAD.md`` §6, each with the measured value, the bar
    and met / missed."""
    found: list[dict[str, Any]] = []

    def add(goal: str, value: float | None, bar: float, unit: str, higher: bool = True) -> None:
        _add_goal(found, goal, value, bar, unit, higher)

    def worst(*values: float | None) -> float | None:
        present = [v for v in values if v is not None]
        return min(present) if present else None

    for name in ("A_thr", "B_thr"):
        add(
            f"{name} ≥ 10x DBOS on SQLite (vs the faster of DBOS default journal / WAL)",
            worst(
                ratio(results, SAGAWAY["sqlite"], "dbos/sqlite", name),
                ratio(results, SAGAWAY["sqlite"], "dbos/sqlite-wal", name),
            ),
            10,
            "x",
        )
        add(
            f"{name} ≥ 10x DBOS on PostgreSQL",
            ratio(results, SAGAWAY["postgres"], "dbos/postgres", name),
            10,
            "x",
        )
    for backend in ("sqlite", "postgres"):
        for name in ("A_thr", "B_thr"):
            add(
                f"{name} ≥ 50x Temporal (Sagaway on {backend})",
                ratio(results, SAGAWAY[backend], "temporal/dev-server", name),
                50,
                "x",
            )
    for backend in ("sqlite", "postgres"):
        for name in ("A_thr", "B_thr"):
            add(
                f"{name} within 2x of minimal checkpointing on {backend} (Sagaway / minimal ≥ 0.5)",
                ratio(results, SAGAWAY[backend], f"checkpoint/{backend}", name),
                0.5,
                "x",
            )
    add(
        "A_seq p50 ≥ 5x lower than DBOS on SQLite (vs the faster DBOS SQLite variant)",
        worst(
            ratio(results, SAGAWAY["sqlite"], "dbos/sqlite", "A_seq"),
            ratio(results, SAGAWAY["sqlite"], "dbos/sqlite-wal", "A_seq"),
        ),
        5,
        "x",
    )
    add(
        "A_seq p50 ≥ 5x lower than DBOS on PostgreSQL",
        ratio(results, SAGAWAY["postgres"], "dbos/postgres", "A_seq"),
        5,
        "x",
    )
    for backend, key in SAGAWAY.items():
        a, b = metric(results, key, "A_thr"), metric(results, key, "B_thr")
        add(
            f"B_thr ≥ A_thr / 1.3 on {backend} (B_thr / A_thr ≥ 0.77)",
            None if a is None or b is None else b / a,
            1 / 1.3,
            "",
        )
    for backend, key in SAGAWAY.items():
        c = results.get(key, {}).get("C")
        value = c.get("ready_to_done_s") if ok(c) else None  # type: ignore[union-attr]
        lease = LEASE_TIMEOUT
        if ok(c):
            assert c is not None
            lease = float(c.get("engine_settings", {}).get("lease_timeout", LEASE_TIMEOUT))
        add(
            f"C on {backend}: READY → all done ≤ lease_timeout + 2 s = {lease + 2:g} s",
            value,
            lease + 2,
            " s",
            higher=False,
        )
    return found


def goals_table(items: list[dict[str, Any]]) -> str:
    lines = ["| goal | measured | met? |", "|---|---|---|"]
    for g in items:
        met = "n/a" if g["met"] is None else ("**met**" if g["met"] else "**missed**")
        lines.append(f"| {g['goal']} | {g['detail']} | {met} |")
    return "\n".join(lines)


def multiproc_table(results: Results, one: str, variants: list[str], labels: dict[str, str]) -> str:
    lines = [
        "| variant | A_thr wf/s | p50 ms | p99 ms | wrong | errors | tables | "
        "CPU s (all processes) | PG cluster CPU s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key in (one, *variants):
        r = results.get(key, {}).get("A_thr")
        if r is None:
            continue
        if not ok(r):
            lines.append(f"| {labels.get(key, key)} | FAILED: {r.get('failed')} |" + " |" * 7)
            continue
        cpu = (_cpu(r.get("process")) or 0.0) + sum(
            _cpu(w) or 0.0 for w in r.get("worker_processes") or []
        )
        ext = r.get("external") or []
        lat = r["latency_ms"]
        chk = r["service_check"]
        cells = [
            labels.get(key, key),
            _fmt(r["throughput_wf_s"]),
            _fmt(lat["p50"]),
            _fmt(lat["p99"]),
            str(r["wrong_results"]),
            str(r["errors"]),
            f"{chk['rows']}/{chk['expected_rows']} {'ok' if chk['ok'] else 'BAD'}",
            _fmt(cpu),
            _fmt(sum(e.get("cpu_s") or 0.0 for e in ext) if ext else None),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    a = metric(results, one, "A_thr")
    # Like for like: a worker process and a client process, 1 worker against 3.
    single = next((k for k in variants if "1worker" in k), None)
    a1 = metric(results, single, "A_thr") if single else None
    notes = []
    for key in variants:
        b = metric(results, key, "A_thr")
        if a and b:
            notes.append(
                f"* {labels.get(key, key)} / 1 process: **{b / a:.2f}x** A_thr throughput."
            )
        if a1 and b and key != single:
            notes.append(
                f"* {labels.get(key, key)} / 1 worker process + client process: "
                f"**{b / a1:.2f}x** A_thr throughput."
            )
    if notes:
        lines += ["", *notes]
    return "\n".join(lines)


# ---------------------------------------------------------------------- issue 19 (performance)

CHECKPOINT_BAR = {"sqlite": 1.2, "postgres": 1.5}
"""A_thr and B_thr: Sagaway / minimal hand-written checkpointing, per backend."""
SEQ_BAR = 1.3
"""A_seq p50: Sagaway / minimal checkpointing at most this."""
PRELOAD_BAR = 0.9
"""A_thr with a long history preloaded / A_thr on an empty store."""
CLI_BAR_MS = 50.0
SCAN_BAR_MS = 10.0
CPU_3PROC_BAR = 1.15
"""CPU per workflow of 3 worker processes / of 1 worker process (all processes + PostgreSQL)."""
SERVER_BAR = 0.5
WAITING_BAR_MB = 100.0
BASELINES = ("checkpoint", "none")
"""Engines that are yardsticks, not peers."""


def cpu_per_wf(results: Results, key: str) -> float | None:
    """ms of CPU per workflow over A_thr's measured part: client + workers + servers."""
    r = results.get(key, {}).get("A_thr")
    if not ok(r):
        return None
    assert r is not None
    cpu = r.get("measured_cpu") or {}
    value = cpu.get("per_wf_ms")
    return None if value is None else float(value)


def _quotient(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b <= 0 else a / b


def issue19_goals(results: Results, waiting: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The goals of issue 19, each with the measured value, the bar and met / missed."""
    found: list[dict[str, Any]] = []
    for backend, key in SAGAWAY.items():
        ckpt = f"checkpoint/{backend}"
        bar = CHECKPOINT_BAR[backend]
        for name in ("A_thr", "B_thr"):
            value = ratio(results, key, ckpt, name)
            _add_goal(
                found, f"{name} ≥ {bar:g}x minimal checkpointing on {backend}", value, bar, "x"
            )
        seq = _quotient(metric(results, key, "A_seq"), metric(results, ckpt, "A_seq"))
        _add_goal(
            found,
            f"A_seq p50 ≤ {SEQ_BAR:g}x minimal checkpointing on {backend}",
            seq,
            SEQ_BAR,
            "x",
            higher=False,
        )
    for backend, key in SAGAWAY.items():
        pre = results.get(f"{key}-preload", {}).get("A_thr")
        n = (pre or {}).get("preload", {}).get("n")
        _add_goal(
            found,
            f"A_thr with {n or 'N'} ended workflows preloaded ≥ {PRELOAD_BAR:g}x empty "
            f"on {backend}",
            _quotient(metric(results, f"{key}-preload", "A_thr"), metric(results, key, "A_thr")),
            PRELOAD_BAR,
            "x",
        )
        probes = (pre or {}).get("history") or {}
        for what in ("list_status", "list_name", "show"):
            value = (probes.get("cli") or {}).get(what, {}).get("beyond_start_ms")
            _add_goal(
                found,
                f"`sagaway {what.replace('_', ' --')}` beyond interpreter start < "
                f"{CLI_BAR_MS:g} ms ({backend}, {n or 'N'} preloaded)",
                value,
                CLI_BAR_MS,
                " ms",
                higher=False,
            )
        _add_goal(
            found,
            f"recovery lease scan (Store.claim_due) < {SCAN_BAR_MS:g} ms ({backend}, "
            f"{n or 'N'} preloaded)",
            (probes.get("scan") or {}).get("claim_due_ms"),
            SCAN_BAR_MS,
            " ms",
            higher=False,
        )
    _add_goal(
        found,
        f"CPU per workflow, 3 worker processes / 1 worker process ≤ {CPU_3PROC_BAR:g}x "
        "(client + workers + PostgreSQL, measured part)",
        _quotient(
            cpu_per_wf(results, "sagaway/postgres-3proc"),
            cpu_per_wf(results, "sagaway/postgres-1worker"),
        ),
        CPU_3PROC_BAR,
        "x",
        higher=False,
    )
    _add_goal(
        found,
        f"A_thr through the Engine Server ≥ {SERVER_BAR:g}x embedded on PostgreSQL",
        _quotient(
            metric(results, "sagaway/grpc+postgres", "A_thr"),
            metric(results, SAGAWAY["postgres"], "A_thr"),
        ),
        SERVER_BAR,
        "x",
    )
    rss = None if not waiting else waiting.get("worker_rss_while_waiting_mb")
    _add_goal(
        found,
        f"worker RSS with {(waiting or {}).get('n', '100000')} workflows WAITING < "
        f"{WAITING_BAR_MB:g} MB",
        rss,
        WAITING_BAR_MB,
        " MB",
        higher=False,
    )
    for backend, key in SAGAWAY.items():
        for name in ("A_seq", "A_thr", "B_thr"):
            ratios = [
                ratio(results, key, peer, name)
                for peer in PEERS[backend]
                if peer.split("/")[0] not in BASELINES
            ]
            present = [r for r in ratios if r is not None]
            _add_goal(
                found,
                f"Sagaway ahead of every peer on {backend}, {name} (worst ratio > 1)",
                min(present) if present else None,
                1.0,
                "x",
            )
    return found


def goal_lines(items: list[dict[str, Any]]) -> list[str]:
    """``goal: value vs bar: MET/MISSED`` lines for the console."""
    return [
        f"{g['goal']}: not measured (n/a)"
        if g["met"] is None
        else f"{g['goal']}: {g['detail']}: {'MET' if g['met'] else 'MISSED'}"
        for g in items
    ]
