"""`sagaway show` and `sagaway list` of per-key order and debounced starts: the place in line
("waits behind X"), the debounce key and when the run starts, the list filters and column."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from click.testing import CliRunner, Result

import sagaway as sw
from sagaway.cli.main import cli


async def sagaway(*args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


def _json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


async def test_show_and_list_a_line_and_a_burst(db_url: str) -> None:
    manager = sw.Manager(db_url, poll_interval=0.05, recovery_interval=0.2)

    @manager.register_workflow
    async def post(n: int) -> int:
        await manager.signal("go").receive()
        return n

    @manager.register_workflow
    async def notify(n: int) -> int:
        return n

    async with manager:
        for n in range(3):
            await manager.workflow(post, n).execute(
                idempotency_key=f"post-{n}", ordering_key="acct-42"
            )
        deadline = time.monotonic() + 20
        while await manager.get_workflow("post-0").status() is not sw.WorkflowStatus.WAITING:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        for n in range(3):
            await manager.workflow(notify, n).execute(
                idempotency_key=f"notify-{n}", debounce_key="ann", debounce=3600
            )

        shown = await sagaway("show", "post-2", "--db", db_url)
        assert shown.exit_code == 0, shown.output
        assert "key acct-42, waits behind post-1 (2 ahead)" in shown.output
        head = _json(await sagaway("show", "post-0", "--db", db_url, "--json"))
        assert head["ordering_key"] == "acct-42" and head["ahead_in_line"] == 0
        assert "first in line" in (await sagaway("show", "post-0", "--db", db_url)).output

        burst = await sagaway("show", "notify-0", "--db", db_url)
        assert "key ann, starts " in burst.output and "unless started again" in burst.output
        data = _json(await sagaway("show", "notify-0", "--db", db_url, "--json"))
        assert data["debounce_key"] == "ann" and data["input"] == {"n": 2}

        line = _json(await sagaway("list", "--db", db_url, "--ordering-key", "acct-42", "--json"))
        assert sorted(row["key"] for row in line) == ["post-0", "post-1", "post-2"]
        assert sorted(row["ordering_seq"] for row in line) == [1, 2, 3]
        listed = await sagaway("list", "--db", db_url, "--debounce-key", "ann")
        assert listed.exit_code == 0, listed.output
        assert "notify-0" in listed.output and "debounce ann, starts" in listed.output
        assert "post-0" not in listed.output
        await manager.signal("go").send("post-0", None)
        await manager.get_workflow("post-0").result(timeout=30)
