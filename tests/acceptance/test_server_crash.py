"""kill -9 around the Engine Server: an application process, then the server itself.

The server (``sagaway server``) and two applications (server_app.py, each running Workers) are
real processes; the database behind the server is SQLite or PostgreSQL. Every activity applies
its effect to a ledger keyed by its idempotency key, so an activity run again after a crash
shows up as a second execution of the same row, never as a second row.

1. An application is killed while it holds workflows inside an activity: the other one's
   Recovery Worker takes them over once their leases expire, and each ends as its saga says.
2. The server is killed while the applications run workflows (some inside an activity, some
   sleeping on a durable timer, some waiting for a signal) and started again on the same port:
   the applications reconnect by themselves and every workflow, old and new, ends right.

The applications poll rarely (APP_POLL): a takeover waits for a lease's expiry, not for a poll,
and after the restart they are woken through the server's Watch stream, which they re-open.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest

from sagaway.store import StoreUnavailable
from tests.acceptance import server_app
from tests.conftest import _fresh_postgres_url

pytestmark = pytest.mark.long  # starts real processes: run by `pytest -m long`

ROOT = Path(__file__).resolve().parents[2]
APP = "from tests.acceptance.server_app import main; main()"
T = TypeVar("T")
APP_POLL = 10.0
"""The applications' poll_interval: long, so what they do at once after the server's restart
was woken by the server's Watch stream (which each re-opens), not found by polling."""
PROMPT = 5.0
"""Seconds after the restart by which a signalled and a new workflow have ended (well under
APP_POLL; about 0.1 s when wake-ups arrive)."""
TIMER = 6.0
"""Seconds the timer workflows sleep: they are still asleep when the server is killed."""
ORDER_STEPS = {
    False: {"reserve", "charge", "ship"},
    True: {"reserve", "charge", "refund", "release"},
}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The database behind the server: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/sagaway.db"
    else:
        yield from _fresh_postgres_url()


class Processes:
    """The processes a test starts; whatever is left is killed at the end."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen[str]] = []
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
            "SRV_POLL_INTERVAL": str(APP_POLL),
        }

    def spawn(self, name: str, args: list[str]) -> subprocess.Popen[str]:
        # stderr to a file: a process logging through an outage must never block on a pipe.
        with open(self.tmp_path / f"{name}.{len(self.procs)}.err", "w") as err:
            proc = subprocess.Popen(
                [sys.executable, *args],
                cwd=ROOT,
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        self.procs.append(proc)
        return proc

    def server(self, db: str, listen: str) -> tuple[subprocess.Popen[str], str]:
        proc = self.spawn("server", ["-m", "sagaway", "server", "--db", db, "--listen", listen])
        line = read_line(proc, 30)
        assert line.startswith("listening on "), (line, self.stderr_of(proc)[-4000:])
        return proc, line.removeprefix("listening on ").strip()

    def app(self, address: str, name: str, *, hold: bool = False) -> subprocess.Popen[str]:
        ledger, marks = self.tmp_path / "ledger.db", self.tmp_path / "marks"
        args = ["-c", APP, f"grpc://{address}", str(ledger), str(marks), name, str(int(hold))]
        proc = self.spawn(name, args)
        line = read_line(proc, 30)
        assert line == "READY\n", (line, self.stderr_of(proc)[-4000:])
        return proc

    def stderr_of(self, proc: subprocess.Popen[str]) -> str:
        index = self.procs.index(proc)
        [path] = self.tmp_path.glob(f"*.{index}.err")
        return path.read_text()

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs:
            proc.communicate(timeout=10)


def read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The process's next stdout line, or "" if none came within ``timeout`` seconds."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if ready else ""


def kill9(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def stop(procs: Processes, proc: subprocess.Popen[str]) -> None:
    """SIGTERM: the process stops gracefully (exit 0)."""
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 0, procs.stderr_of(proc)[-4000:]


async def until(
    check: Callable[[], bool | Awaitable[bool]],
    what: str,
    alive: list[subprocess.Popen[str]],
    timeout: float = 30.0,
) -> None:
    """Poll ``check`` until true; fail if ``timeout`` passes or a process of ``alive`` died."""
    deadline = time.monotonic() + timeout
    while True:
        outcome = check()
        if outcome if isinstance(outcome, bool) else await outcome:
            return
        assert all(p.poll() is None for p in alive), f"a process died waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def retried(call: Callable[[], Awaitable[T]], timeout: float = 30.0) -> T:
    """``call()``, tried again while the server cannot be reached (StoreUnavailable)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await call()
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


def marked(marks: Path, kind: str, key: str) -> list[str]:
    """The applications whose ``charge`` of ``key`` reached ``kind`` (inside/left)."""
    return [p.name.split(".")[1] for p in marks.glob(f"{kind}.*.{key}")]


def ledger(tmp_path: Path) -> dict[tuple[str, str], tuple[int, list[str]]]:
    """(workflow, step) -> (executions, runners); one row per idempotency key, checked here."""
    with sqlite3.connect(tmp_path / "ledger.db", timeout=30) as conn:
        rows = conn.execute("SELECT workflow, step, executions, runners FROM ledger").fetchall()
    by_step = {(wf, step): (n, runners.split(",")) for wf, step, n, runners in rows}
    # A second row for one step would mean its idempotency key changed across processes.
    assert len(by_step) == len(rows), sorted(rows)
    return by_step


@asynccontextmanager
async def client(address: str) -> AsyncIterator[Any]:
    """The test process as one more client of the server: it starts, signals and waits."""
    manager = server_app.manager
    manager.url = f"grpc://{address}"
    async with manager.connect():
        yield manager


@contextmanager
def processes(tmp_path: Path) -> Iterator[Processes]:
    (tmp_path / "marks").mkdir()
    procs = Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.kill_all()


@pytest.mark.slow
@pytest.mark.grpc
async def test_application_killed_mid_activity_is_taken_over(database: str, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    first = [f"first-{i:02d}" for i in range(10)]
    later = [f"later-{i:02d}" for i in range(10)]
    failing = {k for k in first + later if k.endswith(("3", "7"))}
    with processes(tmp_path) as procs:
        server, address = procs.server(database, "127.0.0.1:0")
        (marks / "gate").touch()  # B's charge does not wait; A holds every charge it starts
        victim = procs.app(address, "A", hold=True)
        async with client(address) as manager:
            handles = {}
            for key in first:
                call = manager.workflow(server_app.order, key, key in failing)
                handles[key] = await call.execute(idempotency_key=key)
            # Only A runs: it holds all ten inside their charge (its effect applied).
            await until(
                lambda: all(marked(marks, "inside", k) == ["A"] for k in first),
                "A holding the first ten",
                [server, victim],
            )
            survivor = procs.app(address, "B")
            for key in later:
                call = manager.workflow(server_app.order, key, key in failing)
                handles[key] = await call.execute(idempotency_key=key)
            # Every workflow reached its charge (in A, held, or in B); then A dies.
            await until(
                lambda: all(marked(marks, "inside", k) for k in later),
                "every workflow at its charge",
                [server, victim, survivor],
            )
            kill9(victim)
            held = {k for k in first + later if "A" in marked(marks, "inside", k)}
            results = await asyncio.wait_for(
                asyncio.gather(*(h.result() for h in handles.values())), timeout=40
            )
            statuses = {(await manager.get_workflow(k).status()).value for k in handles}
        stop(procs, survivor)
        stop(procs, server)
    assert statuses == {"COMPLETED"}
    assert {r["key"]: r["status"] for r in results} == {
        k: "compensated" if k in failing else "shipped" for k in first + later
    }
    rows = ledger(tmp_path)
    expected = {(k, s) for k in first + later for s in ORDER_STEPS[k in failing]}
    assert set(rows) == expected
    assert held >= set(first)
    for key in held:
        # A applied the charge and died inside it; B ran it again under the same key.
        assert rows[key, "charge"] == (2, ["A", "B"]), key
        assert set(marked(marks, "left", key)) == {"B"}
    for (key, step), (executions, runners) in rows.items():
        # No process ran a step twice; what came after a held charge ran in B alone.
        assert executions == len(runners) == len(set(runners)), (key, step, runners)
        if key in held and step not in ("reserve", "charge"):
            assert runners == ["B"], (key, step, runners)


@pytest.mark.slow
@pytest.mark.grpc
async def test_server_killed_and_restarted_on_its_port(database: str, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    orders = [f"order-{i}" for i in range(6)]
    timers = [f"timer-{i}" for i in range(5)]
    approvals = [f"approval-{i}" for i in range(5)]
    with processes(tmp_path) as procs:
        server, address = procs.server(database, "127.0.0.1:0")
        apps = [procs.app(address, "A"), procs.app(address, "B")]
        async with client(address) as manager:
            handles = {}
            for key in orders:
                call = manager.workflow(server_app.order, key, key == "order-0")
                handles[key] = await call.execute(idempotency_key=key)
            for key in timers:
                call = manager.workflow(server_app.timer, key, TIMER)
                handles[key] = await call.execute(idempotency_key=key)
            for key in approvals:
                handles[key] = await manager.workflow(server_app.approval, key).execute(
                    idempotency_key=key
                )

            async def all_waiting() -> bool:
                for key in timers + approvals:
                    if (await manager.get_workflow(key).status()).value != "WAITING":
                        return False
                return True

            # Orders inside their charge (held by the gate), the others durably WAITING.
            await until(lambda: all(marked(marks, "inside", k) for k in orders), "charges", [*apps])
            await until(all_waiting, "timers and signal waits", [server, *apps])
            # Waiters in this process wait through the outage.
            waiting = asyncio.gather(*(h.result() for h in handles.values()))
            kill9(server)
            # The charges end while the server is down: their outcomes cannot be recorded.
            (marks / "gate").touch()
            await until(lambda: all(marked(marks, "left", k) for k in orders), "charges", apps)
            # Both applications saw the outage (their Recovery Workers pause) before it ends.
            await until(
                lambda: all("recovery paused" in procs.stderr_of(app) for app in apps),
                "both applications to notice the outage",
                apps,
            )
            server, again = procs.server(database, address)
            assert again == address
            restarted = time.monotonic()
            # A client's first calls may still find its channel down (gRPC retries the
            # connection with a backoff of up to a second): an application retries them, as
            # it would through a database outage; the dedupe id and the key make it safe.
            for key in approvals:
                send = manager.signal("approval").send
                await retried(partial(send, key, f"approved {key}", dedupe_id=f"approve-{key}"))
            start = manager.workflow(server_app.order, "fresh", False).execute
            fresh = await retried(partial(start, idempotency_key="fresh"))
            fresh_result = await fresh.result(timeout=30)
            for key in approvals:
                await handles[key].result(timeout=30)
            prompt = time.monotonic() - restarted
            results = await asyncio.wait_for(waiting, timeout=40)
            statuses = {(await manager.get_workflow(k).status()).value for k in [*handles, "fresh"]}
        # The applications were never restarted: the same processes ran everything.
        assert all(app.poll() is None for app in apps)
        for proc in [*apps, server]:
            stop(procs, proc)
    assert statuses == {"COMPLETED"}
    assert prompt < PROMPT, f"the applications took {prompt:.1f}s to resume after the restart"
    expected_results = {k: "shipped" for k in orders} | {"order-0": "compensated"}
    expected_results |= {k: "woke" for k in timers}
    expected_results |= {k: f"approved {k}" for k in approvals}
    assert {r["key"]: r["status"] for r in results} == expected_results
    assert fresh_result == {"key": "fresh", "status": "shipped"}
    rows = ledger(tmp_path)
    expected = {(k, s) for k in orders for s in ORDER_STEPS[k == "order-0"]}
    expected |= {(k, s) for k in timers for s in ("before", "after")}
    expected |= {(k, s) for k in approvals for s in ("ask", "grant")}
    expected |= {("fresh", s) for s in ORDER_STEPS[False]}
    assert set(rows) == expected
    for (key, step), (executions, runners) in rows.items():
        assert executions == len(runners), (key, step)
        if step != "charge":
            # Only a charge was running when the server died; every other step ran once.
            assert executions == 1, (key, step, runners)
