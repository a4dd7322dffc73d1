"""``sagaway demo``: the crypto purchase saga, run once to completion and once compensated."""

from __future__ import annotations

import shlex
import time
import uuid
from decimal import Decimal

import click
from rich.console import Console

import sagaway as sw
from sagaway.cli import _format
from sagaway.cli import _support as support
from sagaway.cli._format import escape
from sagaway.cli._support import mask_url, run, url_option
from sagaway.cli.lab import lab as lab_command

console = Console()


@click.group(invoke_without_command=True)
@url_option
@click.pass_context
def demo(ctx: click.Context, url: str | None) -> None:
    """Run the crypto purchase saga twice: once to completion, once compensated.

    `sagaway demo lab` runs the order lab (five saga design experiments) instead.
    """
    if ctx.invoked_subcommand is not None:
        return
    from sagaway.demo import crypto_purchase as cp

    async def go() -> None:
        services = cp.Services()
        manager = sw.Manager(url)
        workflow = cp.build(manager, services)
        await support.check_reachable(manager.url)
        run = uuid.uuid4().hex[:6]
        console.print(
            f"[bold]Sagaway demo[/bold]: crypto purchase saga on {escape(mask_url(manager.url))}\n",
            soft_wrap=True,
        )
        async with manager:
            for label, market_open in (("completes", True), ("coin credit fails", False)):
                services.market_open = market_open
                purchase = cp.Purchase(
                    f"trade-{run}-{int(not market_open) + 1}",
                    "alice",
                    Decimal("1500000") / 100,
                    300,
                    Decimal("0.001"),
                )
                key = purchase.trade_id
                console.print(
                    f"[bold]{key}[/bold] ({label}): buy {purchase.btc} BTC "
                    f"for ¥{purchase.yen} + {purchase.points} points"
                )
                started = time.perf_counter()
                try:
                    receipt = await manager.workflow(workflow, purchase).execute_get(
                        idempotency_key=key
                    )
                    outcome = f"[green]COMPLETED[/green] {receipt}"
                except cp.CoinUnavailable as exc:
                    outcome = f"[red]FAILED[/red] {type(exc).__name__}: {exc}"
                elapsed = (time.perf_counter() - started) * 1000
                await _print_steps(manager, key)
                console.print(f"  = {outcome}  ({elapsed:.1f} ms)")
                console.print(
                    f"  balances: ¥{services.yen}  points {services.points}  BTC {services.btc}\n"
                )
        db = f" --db {shlex.quote(mask_url(manager.url))}" if url is not None else ""
        click.echo(f"Inspect them: sagaway show{db} trade-{run}-2 ; sagaway list{db}")

    run(go(), url)


async def _print_steps(manager: sw.Manager, key: str) -> None:
    """The steps of the workflow under ``key``: when each ended, since it started."""
    d = await manager.get_workflow(key).describe()
    t0 = d.created_at
    for s in d.steps:
        end = s.ended_at if s.ended_at is not None else s.started_at
        arrow = "↩ compensate" if s.kind is sw.StepKind.COMPENSATION else "→ step      "
        note = f"  {s.error['message']}" if s.error else ""
        console.print(
            f"  +{(end - t0) * 1000:7.1f} ms  {arrow} {s.name:<18} "
            f"{_format.styled(s.status.value)}{note}"
        )


demo.add_command(lab_command)
