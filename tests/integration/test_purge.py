"""Retention through the Manager and the command line, on SQLite and PostgreSQL:
``manager.purge`` (dry run, statuses, live runs spared, a purged key started again in the same
process), ``Manager(retention=...)``'s background purge driven by the fake clock, and
``sagaway purge`` (output, confirmation, exit codes, bad durations)."""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any

import pytest
from click.testing import CliRunner, Result

import sagaway as sw
from sagaway.cli import purge as purge_cli
from sagaway.cli.main import cli
from sagaway.testing import FakeClock
from tests.store_helpers import raw_sql

S = sw.WorkflowStatus
DAY = 86400.0


class Declined(sw.CompletableError):
    """Declined."""


def build(db_url: str, **options: Any) -> sw.Manager:
    options.setdefault("poll_interval", 0.05)
    m = sw.Manager(db_url, **options)

    @m.register_workflow(name="ok")
    async def ok(x: int) -> int:
        await m.activity(double, x).execute_get()
        return x

    @m.register_activity(name="double")
    async def double(x: int) -> int:
        return 2 * x

    @m.register_workflow(name="declined")
    async def declined() -> None:
        raise Declined("no")

    @m.register_workflow(name="waits")
    async def waits() -> Any:
        return await m.signal("go").receive()

    return m


async def wait_for(status: S, handle: sw.WorkflowHandle[Any]) -> None:
    async def poll() -> None:
        while True:
            if await handle.status() is status:
                return
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), 10)


async def seed(m: sw.Manager) -> None:
    """ok-0..2 COMPLETED, failed-1 FAILED, cancelled-1 CANCELLED, waiting-1 WAITING (with a
    signal sent before it ended, for the cancelled one)."""
    for i in range(3):
        assert await m.workflow("ok", i).execute_get(idempotency_key=f"ok-{i}") == i
    with pytest.raises(Declined):
        await m.workflow("declined").execute_get(idempotency_key="failed-1")
    for key in ("cancelled-1", "waiting-1"):
        handle = await m.workflow("waits").execute(idempotency_key=key)
        await wait_for(S.WAITING, handle)
    assert await m.get_workflow("cancelled-1").cancel("no longer wanted")
    await wait_for(S.CANCELLED, m.get_workflow("cancelled-1"))  # woken to see it, and ended


def keys(db_url: str) -> set[str]:
    return {key for (key,) in raw_sql(db_url, "SELECT key FROM workflows")}


def age(db_url: str, seconds: float) -> None:
    """Make every execution seem to have ended (and started) ``seconds`` earlier."""
    raw_sql(
        db_url,
        f"UPDATE workflows SET ended_at = ended_at - {seconds}, "
        f"created_at = created_at - {seconds}",
    )


# ---------------------------------------------------------------------------- manager.purge


async def test_manager_purge_dry_run_statuses_and_live_runs(db_url: str) -> None:
    clock = FakeClock()
    m = build(db_url, clock=clock)
    async with m:
        await seed(m)
        assert await m.purge(60) == 0  # nothing ended a minute ago yet
        await clock.advance(61)
        assert await m.purge(datetime.timedelta(minutes=1), dry_run=True) == 5
        assert keys(db_url) == {"ok-0", "ok-1", "ok-2", "failed-1", "cancelled-1", "waiting-1"}
        assert await m.purge(60, statuses=["failed", S.CANCELLED]) == 2
        assert keys(db_url) == {"ok-0", "ok-1", "ok-2", "waiting-1"}
        batches: list[int] = []
        assert await m.purge(60, batch_size=2, on_batch=batches.append) == 3
        assert batches == [2, 1]
        assert keys(db_url) == {"waiting-1"}
        (waiting_run,) = raw_sql(db_url, "SELECT run_id FROM workflows")[0]
        assert {r for (r,) in raw_sql(db_url, "SELECT run_id FROM steps")} == {waiting_run}
        assert await m.get_workflow("waiting-1").status() is S.WAITING
        await m.signal("go").send("waiting-1", "now")  # the live run still works
        assert await m.get_workflow("waiting-1").result(timeout=10) == "now"


async def test_a_purged_key_starts_again_in_the_same_process(db_url: str) -> None:
    clock = FakeClock()
    m = build(db_url, clock=clock)
    async with m:
        first = await m.workflow("ok", 1).execute(idempotency_key="order-1")
        assert await first.result() == 1  # remembered in this process's recent ends
        with pytest.raises(sw.IdempotencyConflict):
            await m.workflow("ok", 2).execute(idempotency_key="order-1")
        await clock.advance(10)
        assert await m.purge(5) == 1
        with pytest.raises(sw.WorkflowNotFound):  # not answered from memory
            await first.result()
        with pytest.raises(sw.WorkflowNotFound):
            await m.get_workflow("order-1").status()
        again = await m.workflow("ok", 2).execute(idempotency_key="order-1")
        assert again.run_id != first.run_id
        assert await again.result() == 2
        assert await m.get_workflow("order-1").result() == 2
        description = await m.get_workflow("order-1").describe()
        assert [s.name for s in description.steps] == ["double"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"older_than": 0}, "positive duration"),
        ({"older_than": -5.0}, "positive duration"),
        ({"older_than": datetime.timedelta(0)}, "positive duration"),
        ({"older_than": float("nan")}, "positive duration"),
        ({"older_than": 60, "statuses": ["RUNNING"]}, "only ended workflows can be purged"),
        ({"older_than": 60, "statuses": ["COMPLETED", "SUSPENDED"]}, "not SUSPENDED"),
        ({"older_than": 60, "statuses": ["DONE"]}, "unknown status 'DONE'"),
        ({"older_than": 60, "batch_size": 0}, "batch_size"),
    ],
)
async def test_manager_purge_refuses_bad_arguments(
    db_url: str, kwargs: dict[str, Any], message: str
) -> None:
    m = build(db_url)
    async with m.connect():
        await m.workflow("ok", 1).execute(idempotency_key="k")
        with pytest.raises(ValueError, match=message):
            await m.purge(**kwargs)
        assert keys(db_url) == {"k"}


def test_manager_retention_is_checked_at_once() -> None:
    for bad in (0, -1, datetime.timedelta(seconds=-1)):
        with pytest.raises(ValueError, match="retention must be a positive duration"):
            sw.Manager("sqlite:///unused.db", retention=bad)
    with pytest.raises(ValueError, match="retention_interval"):
        sw.Manager("sqlite:///unused.db", retention=60, retention_interval=0)
    with pytest.raises(TypeError, match="retention"):
        sw.Manager("sqlite:///unused.db", retention="30d")  # type: ignore[arg-type]
    assert sw.Manager("sqlite:///unused.db", retention=datetime.timedelta(days=30)).retention == (
        30 * DAY
    )


# ---------------------------------------------------------------------------- retention


async def test_background_retention_purges_ended_workflows(db_url: str) -> None:
    clock = FakeClock()
    m = build(db_url, clock=clock, retention=60.0, retention_interval=3600.0)
    async with m:
        purger = m.retention_purger
        assert purger is not None
        await seed(m)  # they all end at the clock's start: it moves only when advanced

        async def next_round(seconds: float) -> None:
            """Advance to the purger's next round, exactly, and wait for it to finish."""
            await clock.wait_for_sleep(seconds)
            purger.round_done.clear()
            await clock.advance(seconds)
            await asyncio.wait_for(purger.round_done.wait(), 10)

        await next_round(60.0)  # the first round, a minute after the start
        assert purger.rounds == 1 and purger.purged == 0  # ended a minute ago, not more
        assert len(keys(db_url)) == 6

        await clock.wait_for_sleep(3600.0)  # then hourly: half a minute before the next round,
        await clock.advance(3600.0 - 30)  # another workflow ends
        assert await m.workflow("ok", 7).execute_get(idempotency_key="later") == 7
        purger.round_done.clear()
        await clock.advance(30)
        await asyncio.wait_for(purger.round_done.wait(), 10)
        assert purger.rounds == 2 and purger.purged == 5
        assert keys(db_url) == {"waiting-1", "later"}  # "later" ended too recently
        assert await m.get_workflow("waiting-1").status() is S.WAITING

        await next_round(3600.0)
        assert purger.purged == 6 and keys(db_url) == {"waiting-1"}
    assert m.retention_purger is None  # stopped with the Manager


async def test_background_retention_logs_errors_and_goes_on(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sagaway._engine.retention")
    clock = FakeClock()
    m = build(db_url, clock=clock, retention=30.0, retention_interval=600.0)
    async with m:
        purger = m.retention_purger
        assert purger is not None
        await seed(m)
        failing = True
        real = purger.engine.purge

        async def purge(*args: Any, **kwargs: Any) -> int:
            if failing:
                raise RuntimeError("disk on fire")
            return await real(*args, **kwargs)

        purger.engine.purge = purge  # type: ignore[method-assign]
        await clock.wait_for_sleep(60.0)
        purger.round_done.clear()
        await clock.advance(60.0)
        await asyncio.wait_for(purger.round_done.wait(), 10)
        assert "retention: purge failed" in caplog.text and "disk on fire" in caplog.text
        assert len(keys(db_url)) == 6
        failing = False
        await clock.wait_for_sleep(600.0)
        purger.round_done.clear()
        await clock.advance(600.0)
        await asyncio.wait_for(purger.round_done.wait(), 10)
        assert purger.purged == 5 and keys(db_url) == {"waiting-1"}
        assert "retention: purged 5 workflows" in caplog.text
        # The worker kept working through it all.
        assert await m.workflow("ok", 9).execute_get(idempotency_key="after") == 9


async def test_connect_runs_no_background_purge(db_url: str) -> None:
    m = build(db_url, retention=60.0)
    async with m.connect():
        assert m.retention_purger is None


# ---------------------------------------------------------------------------- live readers


def build_readers(db_url: str, clock: FakeClock, **options: Any) -> sw.Manager:
    """``build``, with workflows on the task queue ``readers`` that read another workflow's
    outcome: ``reader`` attaches to the top-level workflow under the key ``shared``, ``parent``
    starts a child, reads its result, then labels (which fails while ``LABEL["broken"]``)."""
    m = build(db_url, clock=clock, **options)

    @m.register_workflow(name="shared_wf")
    async def shared_wf() -> str:
        return await m.signal("go").receive(str)

    @m.register_workflow(name="reader", task_queue="readers")
    async def reader() -> str:
        return "read " + await m.workflow("shared_wf").execute_get(idempotency_key="shared")

    @m.register_activity(name="label")
    async def label(x: int) -> str:
        if LABEL["broken"]:
            raise Declined("label printer bug")
        return f"label-{x}"

    @m.register_workflow(name="parent", task_queue="readers")
    async def parent(x: int) -> str:
        child = await m.workflow("ok", x).execute()  # step 1
        doubled = await child.result()  # step 2
        return await m.activity(label, doubled).execute_get()  # step 3

    return m


LABEL = {"broken": False}


async def purge_now(m: sw.Manager, clock: FakeClock, how: str) -> int:
    """Purge what ended more than 30 s ago, a minute from now: by hand, or by the Manager's
    background purger (its first round)."""
    if how == "manual":
        await clock.advance(60.0)
        return await m.purge(30.0)
    purger = m.retention_purger
    assert purger is not None
    await clock.wait_for_sleep(60.0)
    purger.round_done.clear()
    await clock.advance(60.0)
    await asyncio.wait_for(purger.round_done.wait(), 10)
    return purger.purged


@pytest.mark.parametrize("how", ["manual", "background"])
async def test_a_workflow_a_waiting_one_attached_to_is_kept_until_it_is_read(
    db_url: str, how: str
) -> None:
    """A workflow WAITING on a top-level workflow it attached to under its key (not its
    child): that workflow ends and a purge runs before the reader resumes; the reader then
    completes with its outcome (it used to stay SUSPENDED with WorkflowNotFound)."""
    clock = FakeClock()
    async with build_readers(db_url, clock) as m:
        await m.workflow("shared_wf").execute(idempotency_key="shared")
        await wait_for(S.WAITING, m.get_workflow("shared"))
        await wait_for(S.WAITING, await m.workflow("reader").execute(idempotency_key="reader-1"))
    # The readers' workers are away while the shared workflow ends and the purge runs.
    retention = {"retention": 30.0} if how == "background" else {}
    elsewhere = build_readers(db_url, clock, **retention)
    elsewhere.task_queues = frozenset({"default"})
    async with elsewhere:
        await elsewhere.signal("go").send("shared", "parcel")
        assert await elsewhere.get_workflow("shared").result(timeout=10) == "parcel"
        assert await purge_now(elsewhere, clock, how) == 0
        assert await elsewhere.get_workflow("shared").status() is S.COMPLETED
    async with build_readers(db_url, clock) as m:
        assert await m.get_workflow("reader-1").result(timeout=10) == "read parcel"
        # Read, and its reader ended: the next purge takes both.
        await clock.advance(60.0)
        assert await m.purge(30.0) == 2
        assert keys(db_url) == set()


@pytest.mark.parametrize("how", ["manual", "background"])
async def test_a_child_whose_start_a_fork_kept_is_kept_until_the_fork_reads_it(
    db_url: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork that kept a child's start but not its result reads the child's end when it runs:
    the purge takes the fork's source (the child's parent) but keeps the child."""
    clock = FakeClock()
    monkeypatch.setitem(LABEL, "broken", True)
    async with build_readers(db_url, clock) as m:
        with pytest.raises(Declined):
            await m.workflow("parent", 4).execute_get(idempotency_key="p-1")
    retention = {"retention": 30.0} if how == "background" else {}
    elsewhere = build_readers(db_url, clock, **retention)
    elsewhere.task_queues = frozenset({"default"})
    async with elsewhere:
        plan = await elsewhere.plan_fork("p-1", from_step=2)
        assert plan.kept == ("1",)  # the child's start, not its result
        await elsewhere.fork("p-1", from_step=2, new_key="p-1-fixed")
        assert await purge_now(elsewhere, clock, how) == 1  # the source, not the child
        assert keys(db_url) == {"p-1/1", "p-1-fixed"}
    monkeypatch.setitem(LABEL, "broken", False)
    async with build_readers(db_url, clock) as m:
        assert await m.get_workflow("p-1-fixed").result(timeout=10) == "label-4"


async def test_a_workflow_attaching_to_an_ended_one_while_a_purge_deletes_it_runs_it_anew(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workflow attaches to an ended one under its key, and a purge deletes it before the
    reader has recorded the start (a background purge running at that moment; found by the
    generative test): the reader starts it anew, as any start under a purged key does, and
    reads that outcome (it used to stay SUSPENDED with WorkflowNotFound)."""
    clock = FakeClock()
    async with build_readers(db_url, clock) as m:
        await m.workflow("shared_wf").execute(idempotency_key="shared")
        await m.signal("go").send("shared", "first")
        assert await m.get_workflow("shared").result(timeout=10) == "first"
        await clock.advance(60.0)
        engine = m._ref.engine
        assert engine is not None
        real = engine.start_child
        purged: list[int] = []

        async def start_child(*args: Any, **kwargs: Any) -> Any:
            record = await real(*args, **kwargs)
            if record.status.ended and not purged:
                purged.append(await m.purge(30.0))  # between the attach and the step
            return record

        monkeypatch.setattr(engine, "start_child", start_child)
        reader = await m.workflow("reader").execute(idempotency_key="reader-1")
        await wait_for(S.WAITING, reader)
        assert purged == [1]
        await wait_for(S.WAITING, m.get_workflow("shared"))  # started anew, for its reader
        await m.signal("go").send("shared", "second")
        assert await reader.result(timeout=10) == "read second"


async def test_a_start_under_a_purged_key_does_not_join_a_child_its_predecessor_left(
    db_url: str,
) -> None:
    """A parent ends while the child it started (default key ``batch-1/1``) still waits; a
    purge deletes the parent (an ended parent is not kept for its children) and frees its key.
    A start under that key creates a new execution, whose call 1 derived ``batch-1/1`` again and
    joined the old child: the new parent read the old child's outcome (in the generative soak, a
    cancellation passed on by the old parent's cancelled owner). It now gets a key space of its
    own while such leftovers are kept, and the plain one again once none is."""
    clock = FakeClock()
    m = build(db_url, clock=clock)

    @m.register_workflow(name="starter")
    async def starter() -> str:
        child = await m.workflow("waits").execute()
        return child.key

    async with m:
        old_key = await m.workflow("starter").execute_get(idempotency_key="batch-1")
        assert old_key == "batch-1/1"
        old_child = (await m.get_workflow(old_key).describe()).run_id
        await clock.advance(60.0)
        assert await m.purge(30.0) == 1  # the parent; its child still waits
        assert keys(db_url) == {"batch-1/1"}
        new_key = await m.workflow("starter").execute_get(idempotency_key="batch-1")
        assert new_key.startswith("batch-1@")  # a child of its own, not the old one
        assert (await m.get_workflow(old_key).describe()).run_id == old_child
        assert await m.get_workflow(old_key).status() is S.WAITING
        for key in (old_key, new_key):
            await m.signal("go").send(key, "done")
            assert await m.get_workflow(key).result(timeout=10) == "done"
        await clock.advance(60.0)
        assert await m.purge(30.0) == 3
        # Nothing left under the key's space: a start uses it again (docs/retention.md).
        again_key = await m.workflow("starter").execute_get(idempotency_key="batch-1")
        assert again_key == "batch-1/1"


# ---------------------------------------------------------------------------- sagaway purge


async def sagaway(*args: str, stdin: str | None = None) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args), input=stdin)


@pytest.fixture
async def old_db(db_url: str) -> str:
    """``seed``'s workflows, their ends moved ten days back."""
    m = build(db_url)
    async with m:
        await seed(m)
    age(db_url, 10 * DAY)
    return db_url


async def test_cli_dry_run_counts_and_deletes_nothing(old_db: str) -> None:
    result = await sagaway("purge", "--db", old_db, "--older-than", "7d", "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == "would purge 5 workflows"
    result = await sagaway(
        "purge", "--db", old_db, "--older-than", "2w", "--dry-run", "--status", "COMPLETED"
    )
    assert result.output.strip().splitlines()[-1] == "would purge 0 workflows"
    assert len(keys(old_db)) == 6


async def test_cli_purges_with_yes(old_db: str) -> None:
    result = await sagaway(
        "purge", "--db", old_db, "--older-than", "7d", "--status", "completed", "--yes"
    )
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == "purged 3 workflows"
    assert keys(old_db) == {"failed-1", "cancelled-1", "waiting-1"}
    result = await sagaway("purge", "--db", old_db, "--older-than", "1d", "-y", "--batch-size", "1")
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == "purged 2 workflows"
    assert keys(old_db) == {"waiting-1"}
    result = await sagaway("purge", "--db", old_db, "--older-than", "1d", "--yes")
    assert result.exit_code == 0 and result.output.strip() == "purged 0 workflows"


async def test_cli_asks_on_a_terminal_and_refuses_without_one(
    old_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = await sagaway("purge", "--db", old_db, "--older-than", "7d")  # stdin: no terminal
    assert result.exit_code == 2, result.output
    assert "pass --yes" in result.output
    assert len(keys(old_db)) == 6

    monkeypatch.setattr(purge_cli, "can_ask", lambda: True)
    result = await sagaway("purge", "--db", old_db, "--older-than", "7d", stdin="n\n")
    assert result.exit_code == 1, result.output
    assert "Purge 5 workflows that ended more than 7 days, 0:00:00 ago" in result.output
    assert "nothing purged" in result.output
    assert len(keys(old_db)) == 6
    result = await sagaway("purge", "--db", old_db, "--older-than", "7d", stdin="y\n")
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == "purged 5 workflows"
    assert keys(old_db) == {"waiting-1"}


@pytest.mark.parametrize("duration", ["30", "abc", "0d", "0s", "-5d", "5y", "d", "1.5.2h", ""])
async def test_cli_refuses_bad_durations(old_db: str, duration: str) -> None:
    result = await sagaway("purge", "--db", old_db, "--older-than", duration, "--yes")
    assert result.exit_code == 2, result.output
    assert "invalid duration" in result.output
    assert len(keys(old_db)) == 6


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--status", "RUNNING"], "only ended workflows can be purged"),
        (["--status", "COMPLETED,nope"], "unknown status"),
        (["--batch-size", "0"], "batch-size"),
        ([], "Missing option '--older-than'"),
    ],
)
async def test_cli_refuses_bad_options(old_db: str, args: list[str], message: str) -> None:
    older = [] if not args else ["--older-than", "7d"]
    result = await sagaway("purge", "--db", old_db, *older, *args, "--yes")
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert len(keys(old_db)) == 6


async def test_cli_exit_codes_for_missing_and_unreachable_databases(tmp_path: Any) -> None:
    result = await sagaway("purge", "--db", f"sqlite:///{tmp_path}/none.db", "--older-than", "1d")
    assert result.exit_code == 3, result.output
    assert not (tmp_path / "none.db").exists()
    url = "postgresql://postgres:secret@127.0.0.1:1/test?connect_timeout=2"
    result = await sagaway("purge", "--db", url, "--older-than", "1d", "--yes")
    assert result.exit_code == 4, result.output
    assert "secret" not in result.output


def test_parse_duration() -> None:
    parse = purge_cli.parse_duration
    assert parse("90s") == 90
    assert parse("15m") == 900
    assert parse("12h") == 12 * 3600
    assert parse("30d") == 30 * DAY
    assert parse("2w") == 14 * DAY
    assert parse("1d12h") == 1.5 * DAY
    assert parse(" 1.5H ") == 5400
    for bad in ("", "10", "1x", "h1", "1 d", "-1d", "0m"):
        with pytest.raises(ValueError, match="invalid duration"):
            parse(bad)
