"""`sagaway replay` and `sagaway show --export` on every backend: the verdict per execution,
the exit code (0 all replay, 1 some diverge, 2 bad usage), and JSON output."""

from __future__ import annotations

import asyncio
import json

from click.testing import CliRunner, Result

from sagaway.cli.main import cli
from tests.integration.patches_app import build
from tests.integration.test_patching import start_and_park

APP = "tests.integration.patches_app"


async def sagaway(*args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


async def test_replay_reports_each_execution_and_exits_1_when_one_diverges(db_url: str) -> None:
    async with build(db_url, "v1") as v1:
        await start_and_park(v1, "h-1", approve=True)
        await start_and_park(v1, "h-2")

    ok = await sagaway("replay", f"{APP}:v2", "--db", db_url, "--all-live")
    assert ok.exit_code == 0, ok.output
    assert "2 of 2 executions replay on this code" in ok.stdout

    bad = await sagaway("replay", f"{APP}:reordered", "--db", db_url, "--all-live")
    assert bad.exit_code == 1, bad.output
    assert "DIVERGES" in bad.stdout and "0 of 2 executions replay" in bad.stdout
    assert "durable call 2 was recorded as activity 'charge'" in " ".join(bad.stdout.split())

    one = await sagaway("replay", f"{APP}:removed", "--db", db_url, "--key", "h-1", "--json")
    assert one.exit_code == 1, one.output
    [report] = [json.loads(line) for line in one.stdout.splitlines()]
    assert report["key"] == "h-1" and report["verdict"] == "diverged"
    assert (report["call_id"], report["recorded_call"]) == ("4", "activity 'ship'")
    assert report["requested_call"] == "signal 'delivered'"


async def test_replay_refuses_bad_usage_and_show_exports_a_history(db_url: str) -> None:
    async with build(db_url, "v1") as v1:
        await start_and_park(v1, "e-1", approve=True)
    usage = await sagaway("replay", f"{APP}:v2", "--db", db_url)
    assert usage.exit_code == 2 and "--key KEY" in usage.output
    both = await sagaway("replay", f"{APP}:v2", "--db", db_url, "--key", "e-1", "--all-live")
    assert both.exit_code == 2
    since = await sagaway(
        "replay", f"{APP}:v2", "--db", db_url, "--key", "e-1", "--ended-since", "7d"
    )
    assert since.exit_code == 2 and "--all-live" in since.output
    missing = await sagaway("replay", f"{APP}:v2", "--db", db_url, "--key", "nope")
    assert missing.exit_code == 3, missing.output

    exported = await sagaway("show", "e-1", "--export", "--db", db_url)
    assert exported.exit_code == 0, exported.output
    document = json.loads(exported.stdout)
    assert document["sagaway_history"] == 1 and document["workflow"]["key"] == "e-1"
    assert [s["name"] for s in document["steps"]] == [
        "reserve",
        "charge",
        "approve",
        "ship",
        "delivered",
    ]
    from sagaway.testing import replay_history

    assert (await replay_history(build(None, "v2"), document)).verdict == "ok"
    assert (await replay_history(build(None, "renamed"), document)).verdict == "diverged"
    combined = await sagaway("show", "e-1", "--export", "--json", "--db", db_url)
    assert combined.exit_code == 2
