"""`sagaway fork` on SQLite and PostgreSQL: its output (what was kept), --wait, --dry-run, the
refusal to drop compensations (and --force, with its warning), and its exit codes (0 ok, 1
refused, 2 bad input, 3 not found)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import sagaway as sw
from sagaway.cli.main import cli
from tests.integration import fork_app


async def sagaway(*args: str) -> Result:
    """Run the ``sagaway`` command (it runs its own event loop: in a thread)."""
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


async def _reaches(m: sw.Manager, key: str, status: sw.WorkflowStatus) -> None:
    deadline = time.monotonic() + 10
    while await m.get_workflow(key).status() is not status:
        assert time.monotonic() < deadline, f"{key} never became {status.value}"
        await asyncio.sleep(0.02)


@pytest.fixture
async def seeded(db_url: str) -> AsyncIterator[str]:
    """``order-7`` FAILED at step 3 (the bug), ``saga-7`` FAILED and compensated, ``waiting-7``
    WAITING; the bug then fixed."""
    fork_app.reset()
    m = fork_app.build(db_url)
    async with m:
        with pytest.raises(fork_app.LabelBug):
            await m.workflow("pipeline", 7).execute_get(idempotency_key="order-7")
        with pytest.raises(fork_app.LabelBug):
            await m.workflow("saga_pipeline", 7).execute_get(idempotency_key="saga-7")
        await m.workflow("approval", 7).execute(idempotency_key="waiting-7")
        await _reaches(m, "waiting-7", sw.WorkflowStatus.WAITING)
    fork_app.BUG["on"] = False
    yield db_url


async def test_fork_prints_what_it_kept_and_a_worker_completes_it(seeded: str) -> None:
    result = await sagaway(
        "fork", "order-7", "--from-step", "3", "--new-key", "fixed", "--db", seeded
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        "order-7 -> fixed: kept steps 1-2 (2 outcomes), runs from step 3 (run "
    )
    assert result.stderr == ""
    m = fork_app.build(seeded)
    async with m:
        assert await m.get_workflow("fixed").result(timeout=10) == "shipped-paid-stock-7"
    # As many as the seeded runs made: steps 1-2 did not run again; step 3 did.
    assert (fork_app.calls["reserve"], fork_app.calls["charge"], fork_app.calls["ship"]) == (
        3,
        2,
        3,
    )

    result = await sagaway("fork", "order-7", "--from-step", "2", "--new-key", "f2", "--db", seeded)
    assert "kept step 1 (1 outcome), runs from step 2" in result.stdout
    result = await sagaway("fork", "order-7", "--from-step", "1", "--new-key", "f1", "--db", seeded)
    assert "kept no step (0 outcomes), runs from step 1" in result.stdout
    result = await sagaway("fork", "order-7", "--from-step", "4", "--new-key", "f4", "--db", seeded)
    assert "kept steps 1-3 (3 outcomes), runs on from where it stopped (step 4)" in result.stdout


async def test_fork_wait_prints_the_result(seeded: str) -> None:
    m = fork_app.build(seeded)
    async with m:  # the worker the fork waits for
        result = await sagaway(
            "fork", "order-7", "--from-step", "3", "--new-key", "fixed", "--wait", "--db", seeded
        )
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines()[-1] == json.dumps("shipped-paid-stock-7")
        fork_app.BUG["on"] = True
        result = await sagaway(
            "fork", "order-7", "--from-step", "3", "--new-key", "again", "--wait", "--db", seeded
        )
        assert result.exit_code == 1, result.output
        assert "again failed: LabelBug: [BUG] label printer bug" in result.stderr


async def test_fork_dry_run_creates_nothing(seeded: str) -> None:
    result = await sagaway(
        "fork", "order-7", "--from-step", "3", "--new-key", "fixed", "--dry-run", "--db", seeded
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == (
        "order-7 -> fixed (dry run): would have kept steps 1-2 (2 outcomes), runs from step 3"
    )
    result = await sagaway("show", "fixed", "--db", seeded)
    assert result.exit_code == 3
    result = await sagaway(
        "fork", "order-7", "--from-step", "3", "--new-key", "saga-7", "--dry-run", "--db", seeded
    )
    assert result.exit_code == 1 and "'saga-7' already exists" in result.stderr


async def test_fork_after_compensations_is_refused_unless_forced(seeded: str) -> None:
    """saga-7's refund and release ran after step 3 failed: a fork from step 3 would reuse the
    charge they refunded. Refused (exit 1, one line naming them), dry run included."""
    for extra in ([], ["--dry-run"], ["--wait"]):
        result = await sagaway(
            "fork", "saga-7", "--from-step", "3", "--new-key", "fixed", *extra, "--db", seeded
        )
        assert result.exit_code == 1, (extra, result.output)
        assert result.stdout == ""
        assert result.stderr.startswith(
            "error: workflow 'saga-7' ran compensations that a fork from step 3 drops: "
            "step 4 refund (COMPLETED), step 5 release (COMPLETED); they may have undone what "
            "steps 1-2 did"
        ), result.stderr
        assert "--force" in result.stderr and result.stderr.count("\n") == 1
    result = await sagaway("show", "fixed", "--db", seeded)
    assert result.exit_code == 3  # nothing created

    result = await sagaway(
        "fork", "saga-7", "--from-step", "3", "--new-key", "fixed", "--force", "--db", seeded
    )
    assert result.exit_code == 0, result.output
    assert "kept steps 1-2 (2 outcomes), runs from step 3" in result.stdout
    assert "warning: saga-7 ran compensations (steps 4, 5) that the fork drops" in result.stderr
    # From step 1 the whole saga runs again: nothing they undid is kept, nothing to refuse.
    result = await sagaway("fork", "saga-7", "--from-step", "1", "--new-key", "f1", "--db", seeded)
    assert result.exit_code == 0 and result.stderr == "", result.output


async def test_fork_exit_codes(seeded: str, tmp_path: Path) -> None:
    cases: list[tuple[list[str], int, str]] = [
        (["waiting-7", "--from-step", "2", "--new-key", "x"], 1, "sagaway terminate waiting-7"),
        (["order-7", "--from-step", "3", "--new-key", "saga-7"], 1, "'saga-7' already exists"),
        (["order-7", "--from-step", "3", "--new-key", "order-7"], 1, "'order-7' already exists"),
        (["order-7", "--from-step", "5", "--new-key", "x"], 2, "from_step must be 1-4"),
        (["order-7", "--from-step", "0", "--new-key", "x"], 2, "from_step must be 1-4"),
        (
            ["order-7", "--from-step", "three", "--new-key", "x"],
            2,
            "'three' is not a valid integer",
        ),
        (["order-7", "--from-step", "3"], 2, "Missing option '--new-key'"),
        (["order-7", "--from-step", "3", "--new-key", ""], 2, "new_key must be a non-empty"),
        (["nosuch", "--from-step", "1", "--new-key", "x"], 3, "no workflow with key 'nosuch'"),
    ]
    for args, code, message in cases:
        result = await sagaway("fork", *args, "--db", seeded)
        assert result.exit_code == code, (args, result.output)
        assert message in result.stderr, (args, result.stderr)
        assert result.stdout == "", (args, result.stdout)
    # Nothing was created by any of them.
    result = await sagaway("list", "--json", "--db", seeded)
    assert sorted(row["key"] for row in json.loads(result.stdout)) == [
        "order-7",
        "saga-7",
        "waiting-7",
    ]
    missing = f"sqlite:///{tmp_path}/none.db"
    result = await sagaway("fork", "order-7", "--from-step", "1", "--new-key", "x", "--db", missing)
    assert result.exit_code == 3 and "no Sagaway database" in result.stderr
    assert not (tmp_path / "none.db").exists()
