"""A PNG of a comparison: throughput (A_thr, B_thr) and A_seq p50 latency per engine / backend.

    .venv/bin/python -m benchmarks.chart benchmarks/results/compare-DATE.json \\
        -o benchmarks/results/compare-DATE.png

Two panels of horizontal bars (one row per engine / backend, longest labels readable): wf/s of
A_thr and B_thr side by side, and A_seq p50 in ms; both on a log scale, since the engines differ
by orders of magnitude. ``benchmarks.compare`` writes it after a full (non-quick) run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks import report


def rows(doc: dict[str, Any]) -> list[tuple[str, float | None, float | None, float | None]]:
    """(label, A_thr wf/s, B_thr wf/s, A_seq p50 ms) for each target with any of them."""
    results: report.Results = doc["results"]
    found = []
    for key, label in doc.get("labels", {k: k for k in results}).items():
        values = tuple(report.metric(results, key, name) for name in ("A_thr", "B_thr", "A_seq"))
        if any(v is not None for v in values):
            found.append((label, *values))
    return found


def write(doc: dict[str, Any], out: Path) -> Path:
    """Draw the chart of the compare document ``doc`` into ``out`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")  # no display on the benchmark machine
    import matplotlib.pyplot as plt

    data = rows(doc)
    if not data:
        raise ValueError("no measured scenario in this document")
    labels = [r[0] for r in data]
    y = list(range(len(data)))
    height = 0.38
    fig, (thr, seq) = plt.subplots(
        1, 2, figsize=(15, 0.45 * len(data) + 2), sharey=True, width_ratios=(3, 2)
    )
    for offset, index, name, color in ((-height / 2, 1, "A_thr", "#2a6f97"),
                                       (height / 2, 2, "B_thr", "#e07a1f")):  # fmt: skip
        values = [r[index] or 0.0 for r in data]
        bars = thr.barh([p + offset for p in y], values, height, label=name, color=color)
        thr.bar_label(bars, labels=[f"{v:.0f}" if v else "" for v in values], fontsize=7, padding=2)
    thr.set_xscale("log")
    thr.set_xlim(right=max(max(r[1] or 0.0, r[2] or 0.0) for r in data) * 3 or None)
    thr.set_xlabel("workflows / s (log scale; higher is better)")
    thr.set_title("Throughput, 100 clients")
    thr.legend(loc="lower right")
    p50 = [r[3] or 0.0 for r in data]
    bars = seq.barh(y, p50, 0.6, color="#6a994e")
    seq.bar_label(bars, labels=[f"{v:.1f}" if v else "" for v in p50], fontsize=7, padding=2)
    seq.set_xscale("log")
    seq.set_xlim(right=max(p50) * 3 or None)
    seq.set_xlabel("ms (log scale; lower is better)")
    seq.set_title("A_seq p50 latency, 1 client")
    thr.set_yticks(y, labels, fontsize=8)
    thr.invert_yaxis()
    for ax in (thr, seq):
        ax.grid(axis="x", which="both", alpha=0.3)
    quick = " (quick mode: small N, not comparable)" if doc.get("quick") else ""
    fig.suptitle(f"Order-saga benchmark, {doc.get('date', '')}{quick}")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", help="a compare JSON (benchmarks/results/compare-*.json)")
    parser.add_argument("-o", "--out", help="PNG to write (default: the JSON's name, .png)")
    args = parser.parse_args(argv)
    path = Path(args.json)
    out = Path(args.out) if args.out else path.with_suffix(".png")
    write(json.loads(path.read_text()), out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
