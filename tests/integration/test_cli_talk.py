"""`sagaway update`, `pause` and `resume` (four backends): exit 0 with the answer as JSON for an
accepted update, 1 with the reason on stderr for a rejected one, 3 for an unknown key; pause
and resume of a workflow and of an activity, shown by `show`, `list` and `pause --list`."""

from __future__ import annotations

import asyncio
import json

from click.testing import CliRunner, Result

import sagaway as sw
from sagaway.cli.main import cli


async def sagaway(*args: str) -> Result:
    """Run the ``sagaway`` command (it runs its own event loop: in a thread)."""
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


def build(db_url: str) -> sw.Manager:
    manager = sw.Manager(db_url, poll_interval=0.05)

    def check(amount: int) -> None:
        if amount > 100:
            raise ValueError(f"{amount} is over the limit")

    async def double(amount: int) -> int:
        return amount * 2

    @manager.register_workflow(name="limits")
    async def limits() -> int:
        return int(await manager.update("raise").handle(double, validator=check))

    @manager.register_workflow(name="idle")
    async def idle() -> None:
        await manager.signal("never").receive(timeout=3600)

    return manager


async def test_update_command(db_url: str) -> None:
    manager = build(db_url)
    async with manager:
        handle = await manager.workflow("limits").execute(idempotency_key="l-1")
        result = await sagaway("update", "l-1", "raise", "500", "--db", db_url)
        assert result.exit_code == 1, result.output
        assert result.stderr.strip() == "l-1: update 'raise' rejected: 500 is over the limit"
        result = await sagaway("update", "l-1", "raise", "21", "--update-id", "x", "--db", db_url)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == 42
        assert await handle.result(timeout=10) == 42
        shown = await sagaway("show", "l-1", "--db", db_url)
        assert "raise:x" in shown.stdout, shown.stdout
        missing = await sagaway("update", "nobody", "raise", "1", "--db", db_url)
        assert missing.exit_code == 3
        bad = await sagaway("update", "l-1", "raise", "{nope", "--db", db_url)
        assert bad.exit_code == 2


async def test_pause_and_resume_commands(db_url: str) -> None:
    manager = build(db_url)
    async with manager:
        await manager.workflow("idle").execute(idempotency_key="i-1")
        result = await sagaway("pause", "i-1", "--reason", "audit", "--db", db_url)
        assert result.exit_code == 0 and "i-1: paused" in result.stdout, result.output
        shown = await sagaway("show", "i-1", "--db", db_url)
        assert "paused" in shown.stdout
        listed = json.loads((await sagaway("list", "--json", "--db", db_url)).stdout)
        assert [(row["key"], row["paused"]) for row in listed] == [("i-1", True)]
        result = await sagaway("resume", "i-1", "--db", db_url)
        assert result.exit_code == 0 and "resumed" in result.stdout, result.output
        result = await sagaway("resume", "i-1", "--db", db_url)
        assert result.exit_code == 1 and "not paused" in result.stderr
        assert (await sagaway("pause", "nobody", "--db", db_url)).exit_code == 3
        assert (await sagaway("pause", "--db", db_url)).exit_code == 2
        result = await sagaway("pause", "--activity", "charge", "--db", db_url)
        assert result.exit_code == 0 and "activity charge: paused" in result.stdout
        listing = await sagaway("pause", "--list", "--db", db_url)
        assert "activity charge: paused since" in listing.stdout
        result = await sagaway("resume", "--queue", "payments", "--db", db_url)
        assert result.exit_code == 1
        result = await sagaway("resume", "--activity", "charge", "--db", db_url)
        assert result.exit_code == 0
        assert "nothing is paused" in (await sagaway("pause", "--list", "--db", db_url)).stdout
