"""Roles as applications meet them: a Manager running workflows with a ``worker`` token (its
workflows start children, send and receive signals, take cluster queue slots, and it writes
its declared schedules), a client Manager with an ``operate`` token (start, signal, result,
cancel, retry, fork), a dashboard with ``read``, and what only ``admin`` may do. On a server in
front of SQLite and of PostgreSQL."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sagaway as sw
from sagaway import credentials
from sagaway.principals import Role
from sagaway.store import PermissionDenied
from tests.grpc_server import ServerProcess as Served

pytestmark = pytest.mark.grpc

ROLES = {"dash": Role.READ, "ops": Role.OPERATE, "runner": Role.WORKER, "root": Role.ADMIN}
TOKENS = {name: f"secret-{name}" for name in ROLES}


def build(url: str, token: str) -> sw.Manager:
    m = sw.Manager(
        url,
        token=token,
        poll_interval=0.05,
        queues={"limited": sw.Queue(concurrency=2, scope="cluster")},
    )

    @m.register_activity(queue="limited")
    async def double(n: int) -> int:
        return 2 * n

    @m.register_workflow(name="child")
    async def child(n: int) -> int:
        return await double(n)

    @m.register_workflow(name="waiter")
    async def waiter() -> int:
        got = await m.signal("go").receive(int, timeout=120)
        return await m.workflow(child, got).execute_get()

    @m.register_workflow(name="sender")
    async def sender(key: str) -> str:
        await m.signal("go").send(key, 21, dedupe_id="from-sender")
        return "sent"

    @m.register_workflow(name="sleeper")
    async def sleeper() -> None:
        await m.sleep(3600)

    @m.register_workflow(name="yearly", schedule="0 0 1 1 *")
    async def yearly() -> None:
        return None

    return m


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    url = (
        f"sqlite:///{tmp_path / 'db.sqlite'}"
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    path = tmp_path / "tokens.toml"
    path.write_text(
        "".join(
            credentials.toml_entry(name, [role], credentials.digest(TOKENS[name]))
            for name, role in ROLES.items()
        )
    )
    with Served(url, tokens_file=path) as running:
        yield running


async def test_each_kind_of_client_does_its_job_with_its_role(server: Served) -> None:
    async with build(server.url, TOKENS["runner"]) as worker:
        assert await worker.list_schedules()  # the declared schedule was written by the worker
        ops = build(server.url, TOKENS["ops"])
        async with ops.connect():
            waiting = await ops.workflow("waiter").execute(idempotency_key="waiter-1")
            await ops.workflow("sender", "waiter-1").execute_get(idempotency_key="s-1")
            assert await waiting.result(timeout=60) == 42
            # Signals, cancels, retries and forks from an operator.
            sleeping = await ops.workflow("sleeper").execute(idempotency_key="sleeper-1")
            assert await ops.signal("noise").send("sleeper-1", 1) is True
            assert await ops.retry("sleeper-1") is False  # not suspended: nothing to retry
            assert await ops.cancel("sleeper-1") is True
            with pytest.raises(sw.WorkflowCancelled):
                await sleeping.result(timeout=60)  # the worker delivered the cancel
            forked = await ops.fork("waiter-1", from_step=1, new_key="waiter-1-again")
            assert forked.key == "waiter-1-again"
            # Terminating, replacing a live run, purging: admin's.
            await ops.workflow("sleeper").execute(idempotency_key="sleeper-2")
            with pytest.raises(PermissionDenied, match=r"'ops'.*EndWorkflow.*the role admin"):
                await ops.terminate("sleeper-2")
            with pytest.raises(PermissionDenied, match="replacing a live execution"):
                await ops.workflow("sleeper").execute(
                    idempotency_key="sleeper-2", on_conflict=sw.OnConflict.TERMINATE_EXISTING
                )
            with pytest.raises(PermissionDenied, match="PurgeEnded"):
                await ops.purge(1)
            with pytest.raises(PermissionDenied, match="SetSchedulePaused"):
                await ops.pause_schedule("yearly")

        dash = build(server.url, TOKENS["dash"])
        async with dash.connect():
            keys = {r.key for r in await dash.list_workflows()}
            assert {"waiter-1", "sleeper-1", "sleeper-2"} <= keys
            assert (await dash.get_workflow("waiter-1").describe()).key == "waiter-1"
            assert await dash.count_workflows()
            refused: list[Any] = [
                dash.workflow("sleeper").execute(idempotency_key="by-dash"),
                dash.signal("go").send("sleeper-2", 1),
                dash.cancel("sleeper-2"),
                dash.retry("sleeper-2"),
                dash.terminate("sleeper-2"),
            ]
            for call in refused:
                with pytest.raises(PermissionDenied, match=r"principal 'dash' \(roles: read\)"):
                    await call

        root = build(server.url, TOKENS["root"])
        async with root.connect():
            assert await root.terminate("sleeper-2", "by root") is True
            assert await root.get_workflow("sleeper-2").status() is sw.WorkflowStatus.TERMINATED
            await root.pause_schedule("yearly")
            # The audit trail names each token's principal, as the server authenticated it.
            who = {(e.action, e.target): e.actor for e in await root.audit_log()}
            assert who[("cancel", "sleeper-1")] == "ops"
            assert who[("fork", "waiter-1-again")] == "ops"
            assert who[("terminate", "sleeper-2")] == "root"
            assert who[("schedule.pause", "yearly")] == "root"


async def test_a_worker_without_the_worker_role_cannot_claim(server: Served) -> None:
    """An operate token cannot run workers: its Manager's open fails on the declared schedule
    it must write, with the reason."""
    with pytest.raises(PermissionDenied, match=r"principal 'ops'.*PutSchedule"):
        async with build(server.url, TOKENS["ops"]):
            pass


async def test_a_worker_refused_its_claims_says_so_once_and_works_once_allowed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A Manager running workers with an ``operate`` token logs the refusal once (not at every
    scan), and takes work as soon as a reloaded tokens file gives it the role."""
    path = tmp_path / "tokens.toml"
    entries = {name: credentials.toml_entry(name, [role], credentials.digest(TOKENS[name]))
               for name, role in ROLES.items()}  # fmt: skip
    path.write_text(entries["ops"] + entries["root"])
    with Served(f"sqlite:///{tmp_path / 'db.sqlite'}", tokens_file=path) as server:
        m = sw.Manager(server.url, token=TOKENS["ops"], poll_interval=0.01)

        @m.register_workflow(name="hello")
        async def hello() -> str:
            return "hello"

        async with m:
            # Started here it would be leased here: refused (CreateWorkflow under a lease).
            with pytest.raises(PermissionDenied, match="under a lease"):
                await m.workflow(hello).execute(idempotency_key="h-0")
            client = sw.Manager(server.url, token=TOKENS["ops"])
            async with client.connect():
                await client.start_by_name("hello", idempotency_key="h-1")
            for _ in range(3000):
                if any("recovery cannot claim work" in r.getMessage() for r in caplog.records):
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("no refusal logged")
            path.write_text(
                entries["root"]
                + credentials.toml_entry(
                    "ops", [Role.OPERATE, Role.WORKER], credentials.digest(TOKENS["ops"])
                )
            )
            assert server.process is not None
            server.process.send_signal(signal.SIGHUP)
            assert await m.get_workflow("h-1").result(timeout=60) == "hello"
        refusals = [r for r in caplog.records if "recovery cannot claim work" in r.getMessage()]
        assert len(refusals) == 1, [r.getMessage() for r in refusals]
        assert "principal 'ops' (roles: operate) may not call ClaimDue" in refusals[0].getMessage()
