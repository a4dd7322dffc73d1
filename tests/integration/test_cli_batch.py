"""``sagaway batch`` on every backend: --dry-run changes nothing, the confirmation (asked on a
terminal, refused without one unless --yes, declined: exit 1), --json reports, the summary's
counts, a second run that does nothing, and the exit codes of misuse."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

import sagaway as sw
from sagaway.cli import batch as batch_cli
from sagaway.cli.main import cli
from tests.integration import batch_app
from tests.integration.test_batch import reaches, seed, statuses

S = sw.WorkflowStatus


async def sagaway(*args: str, input: str | None = None) -> Result:
    """Run the ``sagaway`` command (it runs its own event loop: in a thread)."""
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args), input=input)


@pytest.fixture
async def seeded(db_url: str) -> str:
    """eu-1, eu-2, us-1 WAITING orders, broken-1 SUSPENDED, ok-1 COMPLETED (no worker runs
    afterwards: a cancel stays requested, so what each command did is plain to see)."""
    batch_app.released.clear()
    m = batch_app.build(db_url)
    async with m:
        await seed(m)
    return db_url


async def current(url: str) -> dict[str, S]:
    async with batch_app.build(url).connect() as m:
        return await statuses(m)


async def cancel_requested(url: str) -> list[str]:
    async with batch_app.build(url).connect() as m:
        return sorted(e.target for e in await m.audit_log(action="cancel"))


async def test_dry_run_reports_and_changes_nothing(seeded: str) -> None:
    before = await current(seeded)
    result = await sagaway("batch", "cancel", "--db", seeded, "--key-prefix", "eu-", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "cancel: 2 selected (key_prefix=eu-), 2 would be done" in result.output
    result = await sagaway(
        "batch", "cancel", "--db", seeded, "--name", "order", "--dry-run", "--json"
    )
    report: dict[str, Any] = json.loads(result.stdout)
    assert report["dry_run"] is True and report["matched"] == 3
    assert report["counts"]["done"] == 3 and report["filter"] == {"name": "order"}
    assert sorted(i["key"] for i in report["items"]) == ["eu-1", "eu-2", "us-1"]
    assert await current(seeded) == before and await cancel_requested(seeded) == []


async def test_confirmation(seeded: str, monkeypatch: pytest.MonkeyPatch) -> None:
    args = ("batch", "cancel", "--db", seeded, "--key-prefix", "eu-")
    result = await sagaway(*args)  # the runner's stdin is no terminal
    assert result.exit_code == 2 and "--yes" in result.stderr
    monkeypatch.setattr(batch_cli, "can_ask", lambda: True)
    result = await sagaway(*args, input="n\n")
    assert result.exit_code == 1 and "aborted: nothing done" in result.stderr
    assert "Cancel 2 workflows (key_prefix=eu-: eu-2, eu-1)" in result.stderr
    assert await cancel_requested(seeded) == []
    result = await sagaway(*args, input="y\n")
    assert result.exit_code == 0, result.output
    assert "cancel: 2 selected (key_prefix=eu-), 2 done" in result.stdout
    assert await cancel_requested(seeded) == ["eu-1", "eu-2"]


async def test_yes_json_and_a_second_run(seeded: str) -> None:
    args = ("batch", "cancel", "--db", seeded, "--name", "order", "--yes", "--json")
    result = await sagaway(*args, "--reason", "provider down")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dry_run"] is False and report["counts"]["done"] == 3
    # No worker runs: the cancels stay requested; asked again, each is already requested.
    again = json.loads((await sagaway(*args)).stdout)
    assert (
        again["dry_run"] is False
        and again["counts"]["done"] == 0
        and again["counts"]["already_requested"] == 3
    )
    result = await sagaway("batch", "cancel", "--db", seeded, "--name", "order", "--yes")
    assert result.exit_code == 0
    assert "3 selected (name=order), 0 done, 3 refused (3 already requested)" in (result.stdout)
    assert await cancel_requested(seeded) == ["eu-1", "eu-2", "us-1"]


async def test_terminate_retry_and_signal(seeded: str) -> None:
    db = ("--db", seeded, "--yes")
    result = await sagaway("batch", "terminate", "--key-prefix", "us-", *db)
    assert result.exit_code == 0 and "1 done" in result.stdout, result.output
    result = await sagaway("batch", "retry", "--all", *db, "--json")
    assert [i["key"] for i in json.loads(result.stdout)["items"]] == ["broken-1"]
    result = await sagaway(
        "batch", "retry", "--status", "WAITING,COMPLETED", *db, "--json", "--page-size", "1"
    )
    counts = json.loads(result.stdout)["counts"]
    assert counts["not_suspended"] == 2 and counts["already_ended"] == 1, counts
    result = await sagaway("batch", "signal", "note", '{"n": 1}', "--name", "order", *db)
    assert result.exit_code == 0 and "2 done" in result.stdout, result.output
    result = await sagaway("batch", "signal", "note", '{"n": 1}', "--name", "order", *db)
    assert "2 refused (2 already sent)" in result.stdout, result.output
    assert (await current(seeded))["us-1"] is S.TERMINATED


async def test_misuse_exit_codes(seeded: str, tmp_path: Any) -> None:
    result = await sagaway("batch", "cancel", "--db", seeded, "--yes")
    assert result.exit_code == 2 and "--all" in result.output
    result = await sagaway("batch", "cancel", "--db", seeded, "--status", "BOGUS")
    assert result.exit_code == 2
    result = await sagaway("batch", "signal", "go", "{not json", "--db", seeded, "--all")
    assert result.exit_code == 2 and "PAYLOAD must be JSON" in result.output
    result = await sagaway(
        "batch", "cancel", "--db", seeded, "--all", "--since", "1h", "--until", "2h"
    )
    assert result.exit_code == 2
    missing = f"sqlite:///{tmp_path}/none.db"
    result = await sagaway("batch", "cancel", "--db", missing, "--all", "--yes")
    assert result.exit_code == 3
    assert await cancel_requested(seeded) == []


async def test_the_progress_and_summary_with_workers_running(db_url: str) -> None:
    batch_app.released.clear()
    m = batch_app.build(db_url)
    async with m:
        await seed(m)
        result = await sagaway("batch", "cancel", "--db", db_url, "--name", "order", "--yes")
        assert result.exit_code == 0 and "3 done" in result.stdout, result.output
        for key in ("eu-1", "eu-2", "us-1"):
            await reaches(m, key, S.CANCELLED)
    assert dict(batch_app.released) == {"eu-1": 1, "eu-2": 1, "us-1": 1}
