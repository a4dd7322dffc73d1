"""``sagaway demo lab``: the order lab, its five experiments and a table of outcomes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click

from sagaway import lab as lab_mod

_COLUMNS = ("#", "experiment", "variant", "available", "orders", "verdict")


def _orders(statuses: dict[str, str], *, short: bool = True) -> str:
    def name(saga: str) -> str:
        return saga.removeprefix("saga-") if short else saga

    return " ".join(f"{name(saga)}={status}" for saga, status in statuses.items())


def _table(results: list[lab_mod.Result]) -> list[str]:
    """A plain-text table: the same bytes on every terminal and in pipes."""
    rows = [_COLUMNS]
    for r in results:
        verdict = r.variant.verdict
        if not r.ok:
            expected = r.variant.expected
            verdict = (
                f"NOT AS EXPECTED: expected available={expected.available} "
                f"{_orders(expected.orders)}"
            )
        rows.append(
            (
                str(r.experiment.number),
                r.experiment.title,
                r.variant.label,
                str(r.available),
                _orders(r.orders),
                verdict,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]  # fmt: skip
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


@click.command("lab")
@click.option(
    "-e",
    "--experiment",
    "numbers",
    type=click.IntRange(1, len(lab_mod.EXPERIMENTS)),
    multiple=True,
    help="Run only this experiment (repeatable); default: all five.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the table, not the logs.")
@click.option(
    "--keep",
    "keep",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the services' databases in this directory (default: a temporary one).",
)
def lab(numbers: tuple[int, ...], as_json: bool, quiet: bool, keep: Path | None) -> None:
    """Run the order lab on Sagaway: four services, five experiments.

    Order, inventory, payment and shipping services, each with its own SQLite database, are
    orchestrated by a Sagaway workflow. Time is virtual, so every run prints the same log.
    Exits with status 1 if an outcome differs from the one the experiment is meant to show.
    """
    results = asyncio.run(lab_mod.run_lab(list(numbers) or None, workdir=keep))
    if as_json:
        click.echo(json.dumps([r.as_json() for r in results], indent=2, ensure_ascii=False))
    else:
        if not quiet:
            for r in results:
                click.echo(
                    f"Experiment {r.experiment.number}: {r.experiment.title} ({r.variant.label})"
                )
                for line in r.log:
                    click.echo(line)
                click.echo(
                    f"-- result: available={r.available}  {_orders(r.orders, short=False)}\n"
                )
        for line in _table(results):
            click.echo(line)
        if not quiet:
            click.echo("")
            for experiment in {r.experiment.number: r.experiment for r in results}.values():
                click.echo(f"{experiment.number}. {experiment.title}: {experiment.lesson}")
    if not all(r.ok for r in results):
        raise SystemExit(1)
