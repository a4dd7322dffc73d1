"""``sagaway schedule list|pause|resume|trigger|delete`` on every backend: output, JSON, and
exit codes (0 ok, 1 refused, 2 bad input, 3 unknown id or no database)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import sagaway as sw
from sagaway.cli.main import cli


async def sagaway(*args: str, stdin: str | None = None) -> Result:
    """Run the ``sagaway`` command (it runs its own event loop: in a thread)."""
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args), input=stdin)


def app(db_url: str) -> sw.Manager:
    manager = sw.Manager(db_url)

    @manager.register_workflow(name="report")
    async def report(day: str = "today") -> str:
        return day

    return manager


@pytest.fixture
async def scheduled(db_url: str) -> str:
    """A database holding two schedules (no worker runs: nothing fires)."""
    manager = app(db_url)
    async with manager.connect():
        await manager.schedule("nightly", "report", "30 2 * * *", timezone="Europe/Paris")
        await manager.schedule(
            "hourly", "report", "0 * * * *", kwargs={"day": "now"}, catch_up="all"
        )
    return db_url


async def listed(db_url: str) -> dict[str, dict[str, object]]:
    result = await sagaway("schedule", "list", "--json", "--db", db_url)
    assert result.exit_code == 0, result.output
    return {s["id"]: s for s in json.loads(result.output)}


async def test_list(scheduled: str) -> None:
    found = await listed(scheduled)
    assert sorted(found) == ["hourly", "nightly"]
    nightly = found["nightly"]
    assert nightly["workflow"] == "report"
    assert (nightly["cron"], nightly["timezone"], nightly["catch_up"]) == (
        "30 2 * * *", "Europe/Paris", "one",
    )  # fmt: skip
    assert nightly["paused"] is False and nightly["last_tick_at"] is None
    assert str(nightly["next_tick_at"]).endswith(("T00:30:00+00:00", "T01:30:00+00:00"))
    assert found["hourly"]["args"] == {"day": "now"}
    table = await sagaway("schedule", "list", "--db", scheduled)
    assert table.exit_code == 0
    for text in ("nightly", "hourly", "active"):
        assert text in table.output


async def test_pause_and_resume(scheduled: str) -> None:
    result = await sagaway("schedule", "pause", "nightly", "--db", scheduled)
    assert result.exit_code == 0 and "nightly: paused" in result.output
    assert (await listed(scheduled))["nightly"]["paused"] is True
    result = await sagaway("schedule", "resume", "nightly", "--db", scheduled)
    assert result.exit_code == 0 and "nightly: active, next tick at" in result.output
    assert (await listed(scheduled))["nightly"]["paused"] is False


async def test_trigger_starts_one_execution(scheduled: str) -> None:
    result = await sagaway("schedule", "trigger", "hourly", "--db", scheduled)
    assert result.exit_code == 0, result.output
    key = result.output.strip()
    assert key.startswith("schedule:hourly:manual:")
    manager = app(scheduled)
    async with manager:  # a worker runs it, with the schedule's arguments
        assert await manager.get_workflow(key).result(timeout=15) == "now"


async def test_delete(scheduled: str) -> None:
    refused = await sagaway("schedule", "delete", "nightly", "--db", scheduled)
    assert refused.exit_code == 2 and "--yes" in refused.output  # no terminal to ask
    result = await sagaway("schedule", "delete", "nightly", "--yes", "--db", scheduled)
    assert result.exit_code == 0 and "nightly: deleted" in result.output
    assert sorted(await listed(scheduled)) == ["hourly"]


@pytest.mark.parametrize("verb", ["pause", "resume", "trigger", "delete"])
async def test_unknown_id_exits_3(scheduled: str, verb: str) -> None:
    extra = ["--yes"] if verb == "delete" else []
    result = await sagaway("schedule", verb, "nope", *extra, "--db", scheduled)
    assert result.exit_code == 3
    assert "no schedule with id 'nope'" in result.output


async def test_no_database_exits_3(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/missing.db"
    result = await sagaway("schedule", "list", "--db", url)
    assert result.exit_code == 3
    assert not (tmp_path / "missing.db").exists()
    usage = await sagaway("schedule", "pause", "--db", url)
    assert usage.exit_code == 2  # the ID is missing
