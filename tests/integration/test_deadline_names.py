"""A workflow's *deadline* and a caller's *timeout* are named apart: ``execute(deadline=)``,
``execute_get(deadline=, timeout=)``, ``start_by_name(deadline=)``, ``SyncClient.start`` /
``execute_get(deadline=)``, ``sagaway start --deadline``. The old names of the deadline
(``timeout=`` of a start, ``workflow_timeout=``, ``--timeout``) still work, with a
``DeprecationWarning`` that points at the caller's line and says what to write instead."""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from click.testing import CliRunner

import sagaway as sw
from sagaway.cli.main import cli
from sagaway.testing.internals import engine_of

HOUR = 3600.0


def define(manager: sw.Manager) -> None:
    @manager.register_workflow(name="flow")
    async def flow() -> str:
        return str(await manager.signal("go").receive(str))


async def deadline_of(manager: sw.Manager, key: str) -> float | None:
    record = await engine_of(manager).get(key)
    return None if record.deadline_at is None else record.deadline_at - record.created_at


async def test_execute_takes_the_deadline_as_deadline(db_url: str) -> None:
    manager = sw.Manager(db_url)
    define(manager)
    async with manager.connect():
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the new names warn of nothing
            await manager.workflow("flow").execute(idempotency_key="a", deadline=HOUR)
            await manager.start_by_name("flow", idempotency_key="b", deadline=HOUR)
            with pytest.raises(TimeoutError):  # timeout= of execute_get: this call's wait
                await manager.workflow("flow").execute_get(
                    idempotency_key="c", deadline=HOUR, timeout=0.05
                )
        for key in "abc":
            assert await deadline_of(manager, key) == pytest.approx(HOUR)


OLD: dict[str, tuple[str, Callable[[sw.Manager], Coroutine[Any, Any, Any]]]] = {
    "execute(timeout=)": (
        r"execute\(\): timeout= is deprecated, use deadline=",
        lambda m: m.workflow("flow").execute(idempotency_key="k", timeout=HOUR),
    ),
    "execute_get(workflow_timeout=)": (
        r"execute_get\(\): workflow_timeout= is deprecated, use deadline=",
        lambda m: m.workflow("flow").execute_get(
            idempotency_key="k", workflow_timeout=HOUR, timeout=0.05
        ),
    ),
    "execute_wait(workflow_timeout=)": (
        r"execute_wait\(\): workflow_timeout= is deprecated, use deadline=",
        lambda m: m.workflow("flow").execute_wait(
            idempotency_key="k", workflow_timeout=HOUR, timeout=0.05
        ),
    ),
    "start_by_name(timeout=)": (
        r"start_by_name\(\): timeout= is deprecated, use deadline=",
        lambda m: m.start_by_name("flow", idempotency_key="k", timeout=HOUR),
    ),
}


@pytest.mark.parametrize("old", list(OLD))
async def test_the_old_names_still_set_the_deadline_with_a_warning(db_url: str, old: str) -> None:
    manager = sw.Manager(db_url)
    define(manager)
    message, call = OLD[old]
    async with manager.connect():
        with (
            pytest.warns(DeprecationWarning, match=message) as warned,
            contextlib.suppress(TimeoutError),  # execute_get/execute_wait's own 0.05 s
        ):
            await call(manager)
        assert "the workflow's own deadline" in str(warned[0].message)
        assert "timeout= bounds a wait" in str(warned[0].message)
        assert warned[0].filename == __file__  # it points at the caller's line
        assert await deadline_of(manager, "k") == pytest.approx(HOUR)


async def test_both_names_at_once_are_refused(db_url: str) -> None:
    manager = sw.Manager(db_url)
    define(manager)
    async with manager.connect():
        with pytest.raises(TypeError, match=r"execute\(\): pass deadline= only"):
            await manager.workflow("flow").execute(deadline=1, timeout=2)
        with pytest.raises(TypeError, match=r"execute_get\(\): pass deadline= only"):
            await manager.workflow("flow").execute_get(deadline=1, workflow_timeout=2)
        with pytest.raises(ValueError, match="deadline must be a positive"):
            await manager.workflow("flow").execute(deadline=0)
        assert await manager.list_workflows() == []


async def test_the_sync_client_names_them_apart_too(db_url: str) -> None:
    manager = sw.Manager(db_url)
    define(manager)
    async with manager.connect():
        sync = manager.sync()

        def calls() -> None:
            with sync:
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    sync.start("flow", key="s1", deadline=HOUR)
                    with pytest.raises(TimeoutError):
                        sync.execute_get("flow", key="s2", deadline=HOUR, wait_timeout=0.05)
                with pytest.warns(
                    DeprecationWarning, match=r"SyncClient\.start\(\): timeout="
                ) as w:
                    sync.start("flow", key="s3", timeout=HOUR)
                assert w[0].filename == __file__
                with (
                    pytest.warns(
                        DeprecationWarning, match=r"SyncClient\.execute_get\(\): timeout="
                    ),
                    pytest.raises(TimeoutError),
                ):
                    sync.execute_get("flow", key="s4", timeout=HOUR, wait_timeout=0.05)

        await asyncio.to_thread(calls)
        for key in ("s1", "s2", "s3", "s4"):
            assert await deadline_of(manager, key) == pytest.approx(HOUR)


async def test_the_cli_takes_deadline_and_still_timeout(db_url: str) -> None:
    manager = sw.Manager(db_url)
    define(manager)
    async with manager.connect():  # the schema (a server's database is created by the server)

        def run(*args: str) -> Any:
            return CliRunner().invoke(cli, ["start", "flow", "{}", "--db", db_url, *args])

        new = await asyncio.to_thread(run, "--key", "c1", "--deadline", "3600")
        assert new.exit_code == 0, new.output
        assert "deprecated" not in new.output
        old = await asyncio.to_thread(run, "--key", "c2", "--timeout", "3600")
        assert old.exit_code == 0, old.output
        assert "warning: --timeout is deprecated: use --deadline" in old.stderr
        both = await asyncio.to_thread(run, "--key", "c3", "--timeout", "1", "--deadline", "1")
        assert both.exit_code == 2 and "give --deadline only" in both.output
        assert "--timeout" not in (await asyncio.to_thread(run, "--help")).output
        for key in ("c1", "c2"):
            assert await deadline_of(manager, key) == pytest.approx(HOUR)
