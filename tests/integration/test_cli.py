"""The `sagaway` command line on SQLite and PostgreSQL: every command's output, JSON and exit
codes (0 ok, 1 refused, 2 bad input, 3 not found, 4 unreachable), read-only commands that create
nothing, fast and clear failures on a bad database URL, and masked passwords."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import sagaway as sw
from sagaway.cli._support import mask_url
from sagaway.cli.main import cli
from sagaway.store import DatabaseNotFound
from tests.conftest import POSTGRES_URL, require_postgres
from tests.integration import cli_app

APP = "tests.integration.cli_app:manager"
SEEDED = {
    "ok-1": "COMPLETED",
    "failed-1": "FAILED",
    "suspended-1": "SUSPENDED",
    "cancelled-1": "CANCELLED",
    "waiting-1": "WAITING",
    "waiting-2": "WAITING",
    "pending-1": "PENDING",
}


async def sagaway(*args: str) -> Result:
    """Run the ``sagaway`` command (it runs its own event loop: in a thread)."""
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


async def wait_until(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def _reaches(m: sw.Manager, key: str, status: sw.WorkflowStatus) -> None:
    async def check() -> bool:
        return await m.get_workflow(key).status() is status

    await wait_until(check)


@pytest.fixture
async def seeded(db_url: str) -> str:
    """A database holding workflows in every status of ``SEEDED``."""
    m = cli_app.build(db_url)
    async with m:
        assert await m.workflow("ok", 1).execute_get(idempotency_key="ok-1") == {"x": 1, "y": None}
        with pytest.raises(cli_app.Declined):
            await m.workflow("declined").execute_get(idempotency_key="failed-1")
        await m.workflow("broken").execute(idempotency_key="suspended-1")
        for key in ("cancelled-1", "waiting-1", "waiting-2"):
            await m.workflow("waits").execute(idempotency_key=key)
            await _reaches(m, key, sw.WorkflowStatus.WAITING)
        await _reaches(m, "suspended-1", sw.WorkflowStatus.SUSPENDED)
        assert await m.get_workflow("cancelled-1").cancel("no longer wanted")
        await _reaches(m, "cancelled-1", sw.WorkflowStatus.CANCELLED)
    async with m.connect():
        await m.workflow("ok", 2).execute(idempotency_key="pending-1")
        for key, status in SEEDED.items():
            assert (await m.get_workflow(key).status()).value == status, key
    return db_url


# ---------------------------------------------------------------------------- list, count, show


async def test_list_shows_every_workflow_and_filters(seeded: str) -> None:
    result = await sagaway("list", "--db", seeded)
    assert result.exit_code == 0, result.output
    for key in SEEDED:
        assert key in result.output
    result = await sagaway("list", "--db", seeded, "--json", "--status", "suspended,FAILED")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert sorted((r["key"], r["status"]) for r in rows) == [
        ("failed-1", "FAILED"),
        ("suspended-1", "SUSPENDED"),
    ]
    result = await sagaway("list", "--db", seeded, "--json", "--name", "ok")
    assert sorted(r["key"] for r in json.loads(result.output)) == ["ok-1", "pending-1"]
    result = await sagaway("list", "--db", seeded, "--jsonl", "--key-prefix", "waiting-")
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert sorted(r["key"] for r in lines) == ["waiting-1", "waiting-2"]
    result = await sagaway("list", "--db", seeded, "--json", "--limit", "2")
    assert len(json.loads(result.stdout)) == 2  # the next-page hint is on stderr
    result = await sagaway("list", "--db", seeded, "--json", "--status", "COMPLETED", "--name", "x")
    assert result.exit_code == 0 and json.loads(result.output) == []


async def test_list_refuses_bad_options(seeded: str) -> None:
    for args in (["--limit", "0"], ["--json", "--jsonl"], ["--status", "BOGUS"]):
        result = await sagaway("list", "--db", seeded, *args)
        assert result.exit_code == 2, (args, result.output)
        assert "no workflows" not in result.output


async def test_count(seeded: str) -> None:
    result = await sagaway("count", "--db", seeded, "--json")
    assert result.exit_code == 0, result.output
    counts = json.loads(result.output)
    assert counts["total"] == len(SEEDED)
    assert counts["WAITING"] == 2 and counts["COMPLETED"] == 1 and counts["TERMINATED"] == 0
    assert set(counts) == {s.value for s in sw.WorkflowStatus} | {"total"}
    result = await sagaway("count", "--db", seeded)
    assert result.exit_code == 0 and "SUSPENDED" in result.output and "total" in result.output


async def test_show(seeded: str) -> None:
    result = await sagaway("show", "ok-1", "--db", seeded)
    assert result.exit_code == 0 and "COMPLETED" in result.output
    result = await sagaway("show", "failed-1", "--db", seeded, "--json")
    data = json.loads(result.output)
    assert data["status"] == "FAILED" and "card declined" in data["error"]["message"]
    result = await sagaway("show", "nosuch", "--db", seeded)
    assert result.exit_code == 3 and "nosuch" in result.stderr


# ---------------------------------------------------------------------------- operations


async def test_retry_exit_codes(seeded: str) -> None:
    result = await sagaway("retry", "suspended-1", "--db", seeded)
    assert result.exit_code == 0 and "retried" in result.output
    result = await sagaway("retry", "ok-1", "--db", seeded)
    assert result.exit_code == 1 and "COMPLETED, not SUSPENDED" in result.stderr
    result = await sagaway("retry", "nosuch", "--db", seeded)
    assert result.exit_code == 3 and "no workflow with key 'nosuch'" in result.stderr


async def test_cancel_and_terminate(seeded: str) -> None:
    result = await sagaway("terminate", "waiting-1", "--db", seeded, "--reason", "bad data")
    assert result.exit_code == 0 and "TERMINATED" in result.output, result.output
    shown = json.loads((await sagaway("show", "waiting-1", "--db", seeded, "--json")).output)
    assert shown["status"] == "TERMINATED" and "bad data" in shown["error"]["message"]
    assert not [s for s in shown["steps"] if s["kind"] == "compensation"]
    result = await sagaway("terminate", "waiting-1", "--db", seeded)
    assert result.exit_code == 1 and "already ended (TERMINATED)" in result.stderr
    result = await sagaway("cancel", "pending-1", "--db", seeded)
    assert result.exit_code == 0 and "cancel requested" in result.output, result.output
    # No worker runs: the request waits for one (cancellation is cooperative).
    shown = json.loads((await sagaway("show", "pending-1", "--db", seeded, "--json")).output)
    assert shown["status"] == "PENDING"
    waiting = asyncio.ensure_future(
        sagaway("cancel", "waiting-2", "--db", seeded, "--wait", "--reason", "withdrawn")
    )
    async with cli_app.build(seeded):  # a worker: it runs the workflow to its cancellation
        result = await asyncio.wait_for(waiting, 20)
    assert result.exit_code == 0 and "waiting-2: CANCELLED" in result.output, result.output
    shown = json.loads((await sagaway("show", "waiting-2", "--db", seeded, "--json")).output)
    assert shown["status"] == "CANCELLED" and "withdrawn" in shown["error"]["message"]
    result = await sagaway("cancel", "ok-1", "--db", seeded)
    assert result.exit_code == 1 and "already ended (COMPLETED)" in result.stderr
    for command in ("cancel", "terminate"):
        result = await sagaway(command, "nosuch", "--db", seeded)
        assert result.exit_code == 3, (command, result.output)


async def test_signal_exit_codes(seeded: str) -> None:
    result = await sagaway("signal", "nosuch", "go", '{"a": 1}', "--db", seeded)
    assert result.exit_code == 3, result.output
    result = await sagaway("signal", "waiting-1", "go", "{not json", "--db", seeded)
    assert result.exit_code == 2 and "PAYLOAD must be JSON" in result.output


async def test_signal_dedupe_id_is_sent_once_even_after_the_workflow_ended(seeded: str) -> None:
    send = ("signal", "waiting-2", "go", '"yes"', "--dedupe-id", "cb-1", "--wait-delivery", "0")
    result = await sagaway(*send, "--db", seeded)
    assert result.exit_code == 0 and "already sent" not in result.output, result.output
    m = cli_app.build(seeded)
    async with m:
        assert await m.get_workflow("waiting-2").result(timeout=10) == "yes"
    # The webhook retries after its signal ended the workflow: told it was sent, exit 0.
    result = await sagaway(*send, "--db", seeded)
    assert result.exit_code == 0 and "already sent" in result.output, result.output
    # Another dedupe id is a new signal, which the ended workflow cannot take.
    result = await sagaway(
        "signal", "waiting-2", "go", '"no"', "--dedupe-id", "cb-2", "--db", seeded
    )
    assert result.exit_code == 1 and "has ended" in result.output, result.output


async def test_start(seeded: str) -> None:
    result = await sagaway("start", "ok", '{"x": 5}', "--key", "s-1", "--app", APP, "--db", seeded)
    assert result.exit_code == 0 and "s-1" in result.output, result.output
    result = await sagaway("start", "ok", "[6, 7]", "--key", "s-2", "--app", APP, "--db", seeded)
    assert result.exit_code == 0, result.output
    result = await sagaway("start", "ok", "[1]", "--key", "ok-1", "--app", APP, "--db", seeded)
    assert result.exit_code == 0 and "already exists (COMPLETED" in result.output, result.output
    result = await sagaway("start", "ok", "[6, 7]", "--key", "ok-1", "--app", APP, "--db", seeded)
    assert result.exit_code == 1 and "other arguments" in result.stderr, result.output
    m = cli_app.build(seeded)
    async with m:
        assert await m.get_workflow("s-1").result(timeout=10) == {"x": 5, "y": None}
        assert await m.get_workflow("s-2").result(timeout=10) == {"x": 6, "y": 7}
        result = await sagaway(
            "start", "ok", '{"x": 8}', "--key", "s-3", "--app", APP, "--db", seeded, "--wait"
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout.splitlines()[-1]) == {"x": 8, "y": None}
        result = await sagaway(
            "start", "declined", "--key", "s-4", "--app", APP, "--db", seeded, "--wait"
        )
        assert result.exit_code == 1 and "card declined" in result.stderr, result.output


async def test_start_refuses_bad_input(seeded: str) -> None:
    for name, args in (("ok", "5"), ("ok", "{bad"), ("nosuch", "{}")):
        result = await sagaway("start", name, args, "--key", "b", "--app", APP, "--db", seeded)
        assert result.exit_code == 2, (name, args, result.output)
    result = await sagaway("start", "ok", "--key", "b", "--app", "tests.integration.cli_app:nope")
    assert result.exit_code == 2 and "module tests.integration.cli_app has no attribute nope" in (
        result.output
    )


# ---------------------------------------------------------------------------- read-only opens


def _pg_schema_exists(url: str) -> bool:
    import psycopg

    from sagaway.store.postgres import parse_postgres_url

    conninfo, schema, _, _ = parse_postgres_url(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row is not None


def _exists(url: str) -> bool:
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///")).exists()
    return _pg_schema_exists(url)


@pytest.mark.direct_db  # what it checks is the database itself (the server creates its own)
async def test_connect_without_create_creates_nothing(db_url: str) -> None:
    if db_url.startswith("sqlite:///"):  # a directory that does not exist either
        db_url = db_url.replace("/sagaway.db", "/sub/sagaway.db")
    with pytest.raises(DatabaseNotFound, match="no Sagaway database at"):
        async with sw.Manager(db_url).connect(create=False):
            pass
    assert not _exists(db_url)
    if db_url.startswith("sqlite:///"):
        assert not Path(db_url.removeprefix("sqlite:///")).parent.exists()
    async with sw.Manager(db_url).connect():
        pass
    async with sw.Manager(db_url).connect(create=False) as m:
        assert await m.count_workflows() == {}


@pytest.mark.direct_db
async def test_read_only_commands_create_nothing(db_url: str) -> None:
    for args in (["list"], ["show", "k"], ["count"], ["list", "--json"]):
        result = await sagaway(*args, "--db", db_url)
        assert result.exit_code == 3, (args, result.output)
        assert result.stderr.startswith("error: no Sagaway database at "), result.stderr
        assert "Traceback" not in result.output
    assert not _exists(db_url)


async def test_a_sqlite_file_that_is_not_sagaway_is_not_touched(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    other.write_bytes(b"")
    result = await sagaway("list", "--db", f"sqlite:///{other}")
    assert result.exit_code == 3 and "no Sagaway tables" in result.stderr
    assert other.read_bytes() == b""


# ---------------------------------------------------------------------------- bad databases


def _base(url: str) -> str:
    return url.split("?", 1)[0].rsplit("/", 1)[0]


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("tail", "code", "message"),
    [
        ("/nosuchdb", 4, 'database "nosuchdb" does not exist'),
        ("/test?pool_sise=3", 2, 'invalid URI query parameter: "pool_sise"'),
    ],
)
async def test_bad_postgres_urls_fail_fast(tail: str, code: int, message: str) -> None:
    require_postgres()
    url = _base(POSTGRES_URL) + tail
    for command in ("list", "count"):
        started = time.monotonic()
        result = await sagaway(command, "--db", url)
        assert time.monotonic() - started < 5
        assert result.exit_code == code, result.output
        assert message in result.stderr and "Traceback" not in result.output
        assert result.stderr.count("\n") == 1


async def test_unreachable_and_unsupported_urls() -> None:
    started = time.monotonic()
    result = await sagaway("list", "--db", "postgresql://u:s3cret@127.0.0.1:1/db")
    assert time.monotonic() - started < 5
    assert result.exit_code == 4 and "Connection refused" in result.stderr, result.output
    assert "s3cret" not in result.output and result.stderr.count("\n") == 1
    result = await sagaway("list", "--db", "mysql://u:s3cret@host/db")
    assert result.exit_code == 2 and "unsupported database URL" in result.stderr
    assert "s3cret" not in result.output
    result = await sagaway("count", "--db", "sqlite:///x.db?synchronus=full")
    assert result.exit_code == 2 and "synchronus" in result.stderr


def test_mask_url() -> None:
    assert mask_url("postgresql://user:pw@host/db") == "postgresql://user:***@host/db"
    assert mask_url("postgresql://user@host/db?password=pw&schema=s") == (
        "postgresql://user@host/db?password=***&schema=s"
    )
    assert mask_url("sqlite:///a.db") == "sqlite:///a.db"


@pytest.mark.postgres
async def test_list_title_masks_the_password(postgres_url: str) -> None:
    async with sw.Manager(postgres_url).connect():
        pass
    url = postgres_url.replace("://postgres@", "://postgres:s3cret@")
    assert "s3cret" in url
    result = await sagaway("list", "--db", url)
    assert result.exit_code == 0, result.output
    assert "s3cret" not in result.output and "postgres:***@" in result.output


# ---------------------------------------------------------------------------- small fixes


def test_bare_sagaway_prints_help_with_exit_codes() -> None:
    result = CliRunner().invoke(cli, [])
    assert result.exit_code == 0 and "Usage" in result.output
    assert "Exit codes" in result.output and "cannot reach the database" in result.output


def test_worker_names_a_missing_attribute() -> None:
    result = CliRunner().invoke(cli, ["worker", "tests.integration.cli_app:nosuch"])
    assert result.exit_code == 2
    assert "module tests.integration.cli_app has no attribute nosuch" in result.output
    assert "NoneType" not in result.output


@pytest.mark.parametrize("value", [" , ", "", "-v"])
def test_worker_refuses_task_queues_without_names(value: str) -> None:
    result = CliRunner().invoke(cli, ["worker", APP, "--task-queues", value])
    assert result.exit_code == 2 and "give at least one task queue" in result.output


def test_a_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sagaway.store.postgres", None)  # psycopg not installed
    result = CliRunner().invoke(cli, ["list", "--db", "postgresql://u@127.0.0.1:1/db"])
    assert result.exit_code == 2 and "sagaway[postgres]" in result.stderr, result.output


@pytest.mark.postgres
def test_worker_banner_masks_the_password(postgres_url: str) -> None:
    url = postgres_url.replace("://postgres@", "://postgres:s3cret@")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sagaway", "worker", APP, "--db", url],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert "postgres:***@" in banner and "s3cret" not in banner + err, banner + err
    assert proc.returncode == 0, err


def test_worker_fails_fast_on_an_unreachable_database() -> None:
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["worker", APP, "--db", "postgresql://u:pw@127.0.0.1:1/db"])
    assert time.monotonic() - started < 5
    assert result.exit_code == 4 and "Connection refused" in result.output


async def test_cancelled_message_does_not_repeat_itself(db_url: str) -> None:
    m = cli_app.build(db_url)
    async with m:
        handle = await m.workflow("waits").execute(idempotency_key="o-500")
        await _reaches(m, "o-500", sw.WorkflowStatus.WAITING)
        assert await handle.cancel("changed my mind")
        with pytest.raises(sw.WorkflowCancelled) as caught:
            await handle.result(timeout=10)
    assert str(caught.value) == "workflow 'o-500' ended CANCELLED: changed my mind"


def test_demo_hint_names_the_database(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path}/demo.db"
    result = CliRunner().invoke(cli, ["demo", "--db", url])
    assert result.exit_code == 0, result.output
    assert f"sagaway show --db {url} trade-" in result.output
    assert f"sagaway list --db {url}" in result.output
    assert os.path.exists(tmp_path / "demo.db")
