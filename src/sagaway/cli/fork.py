"""``sagaway fork``: run an ended workflow again under a new key, from one of its steps."""

from __future__ import annotations

import dataclasses
import sys

import click

import sagaway as sw
from sagaway.cli._ending import result_or_error
from sagaway.cli._format import safe
from sagaway.cli._support import (
    Exit,
    reason_option,
    run,
    sealing_codec,
    sealing_key_option,
    url_option,
)


@dataclasses.dataclass(frozen=True, slots=True)
class _Outcome:
    plan: sw.ForkPlan
    run_id: str | None
    """None: a dry run."""
    ended: tuple[bool, str] | None = None
    """With --wait: whether it completed, and its result (JSON) or its error."""


def summary(plan: sw.ForkPlan) -> str:
    """``kept steps 1-2 (3 outcomes), runs from step 3``."""
    outcomes = f"{len(plan.kept)} outcome{'' if len(plan.kept) == 1 else 's'}"
    top = plan.kept_top_level
    if top is None:
        kept = f"kept no step ({outcomes})"
    elif top[0] == top[1]:
        kept = f"kept step 1 ({outcomes})"
    else:
        kept = f"kept steps {top[0]}-{top[1]} ({outcomes})"
    if plan.from_step > plan.last_step:
        return f"{kept}, runs on from where it stopped (step {plan.from_step})"
    return f"{kept}, runs from step {plan.from_step}"


@click.command()
@url_option
@click.argument("key")
@click.option(
    "--from-step",
    "from_step",
    required=True,
    type=int,
    metavar="N",
    help="The first top-level step to run again (the # column of `sagaway show KEY`).",
)
@click.option("--new-key", "new_key", required=True, help="The key of the new execution.")
@click.option("--wait", is_flag=True, help="Wait for the end; print the result or the error.")
@click.option("--dry-run", is_flag=True, help="Print what would be kept; create nothing.")
@click.option(
    "--force",
    is_flag=True,
    help="Fork even though KEY ran compensations the fork drops (they may have undone the "
    "steps it keeps).",
)
@sealing_key_option
@reason_option
def fork(
    url: str | None,
    key: str,
    from_step: int,
    new_key: str,
    wait: bool,
    dry_run: bool,
    force: bool,
    codec_key_file: str | None,
    reason: str | None,
) -> None:
    """Run the ended workflow KEY again under NEW_KEY, from its step N.

    The new execution has the same workflow, arguments and task queue. It reuses the recorded
    outcomes of steps 1 .. N-1 (and of parallel branches that ended before step N started);
    the rest runs again, with new idempotency keys, on a worker serving its task queue.
    N one past the last step keeps every step. Only an ended workflow (COMPLETED, FAILED,
    CANCELLED, TERMINATED) is forked: end a live or SUSPENDED one with `sagaway terminate`.
    If KEY ran compensations from step N on (a refund after step N failed) while the fork
    keeps steps before N, they may have undone what those steps did: the fork is refused,
    naming them, unless --force. A workflow whose payloads are encrypted (Manager(codec=...))
    needs the keys (--codec-key-file): the fork seals its copies again for its own run.

    Exit 1 if KEY has not ended, ran compensations the fork drops (without --force), or
    NEW_KEY is taken (or, with --wait, the fork failed), 2 if N is out of range, 3 if there
    is no workflow KEY (or a kept step started a child a purge has deleted).
    """

    codec = sealing_codec(codec_key_file)

    async def forking() -> _Outcome:
        async with sw.Manager(url, codec=codec).connect(create=False) as manager:
            plan = await manager.plan_fork(key, from_step=from_step, force=force)
            if dry_run:
                try:
                    status = await manager.get_workflow(new_key).status()
                except sw.WorkflowNotFound:
                    return _Outcome(plan, None)
                raise sw.WorkflowAlreadyExists(new_key, status.value)
            handle = await manager.fork(
                key, from_step=from_step, new_key=new_key, force=force, reason=reason
            )
            assert handle.run_id is not None
            if not wait:
                return _Outcome(plan, handle.run_id)
            return _Outcome(plan, handle.run_id, await result_or_error(handle))

    _report(run(forking(), url), key, new_key)


def _report(outcome: _Outcome, key: str, new_key: str) -> None:
    """Print what the fork kept (or would keep), and with --wait how it ended."""
    plan = outcome.plan
    if outcome.run_id is None:
        click.echo(safe(f"{key} -> {new_key} (dry run): would have {summary(plan)}"))
    else:
        click.echo(safe(f"{key} -> {new_key}: {summary(plan)} (run {outcome.run_id})"))
    if plan.compensated and plan.kept:  # --force (else refused); from step 1 keeps nothing
        click.echo(
            f"warning: {key} ran compensations (steps {', '.join(plan.compensated)}) that the "
            "fork drops; their effects happened and may have undone steps the fork keeps",
            err=True,
        )
    if outcome.ended is not None:
        ok, text = outcome.ended
        if not ok:
            click.echo(safe(f"{new_key} failed: {text}"), err=True)
            sys.exit(int(Exit.REFUSED))
        click.echo(safe(text))
