"""Failover under load on a Patroni cluster (issue 36): one etcd, two PostgreSQL 15 nodes with
synchronous replication (``tests/patroni.py``), the store on the multi-host URL
``postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/postgres?target_session_attrs=read-write``.

100 sagas (a step with a compensation, a durable timer, a signal; half declined and
compensated) run on worker processes while the cluster is disrupted mid-run:

- the leader's postmaster killed -9 (Patroni restarts it, crash recovery, same leader);
- the whole leader node killed -9 (Patroni and PostgreSQL: the replica takes over once the
  leader key expires);
- a clean switchover through Patroni's REST API;
- the only worker killed -9, and the leader's postmaster killed as a new worker starts and
  recovers the orphaned sagas (recovery's scan meets the failover).

Each time: every acknowledged start ends as its signal says, each step's side effect is one row
under its idempotency key, and the time from the disruption to the first step committed
afterwards (``track_commit_timestamp``) is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

import sagaway as sw
from tests.integration import failover_app
from tests.patroni import Cluster, kill_node, running_cluster

pytestmark = [pytest.mark.long, pytest.mark.slow, pytest.mark.timeout(420)]

Workers = list[subprocess.Popen[str]]
SAGAS = 100
DISRUPT_AFTER = 35
"""Side effects recorded before the disruption (of about 200 in all)."""


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with running_cluster() as started:
        yield started


def start_worker(url: str, *args: str) -> subprocess.Popen[str]:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.failover_app", url, *args],
        cwd=root,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def stop_workers(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.stdin is not None:
            with contextlib.suppress(OSError):  # a killed worker's pipe may be broken
                proc.stdin.close()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _query(url: str, text: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with psycopg.connect(url, connect_timeout=2, autocommit=True) as conn:
        cur = conn.execute(text.encode() if not params else text, params)
        return cur.fetchall() if cur.description is not None else []


async def _effects_reach(url: str, count: int) -> None:
    """Until ``count`` side effects are recorded (the sagas are under way)."""
    while True:
        try:
            rows = await asyncio.to_thread(_query, url, "SELECT count(*) FROM failover_effects")
            if int(str(rows[0][0])) >= count:
                return
        except psycopg.OperationalError:
            pass
        await asyncio.sleep(0.05)


async def _run_one(client: sw.Manager, n: int) -> tuple[str, str]:
    key = f"trip-{n}"
    handle = await client.workflow("trip", n).execute(idempotency_key=key)
    await client.signal("go").send(key, n % 2 == 0, dedupe_id=f"go-{n}")
    try:
        return "COMPLETED", await handle.result(timeout=300)
    except sw.CompletableError as exc:
        return "FAILED", str(exc)


def _check_effects(url: str) -> int:
    """Every saga's steps each left one side effect; the number of repeated attempts."""
    rows = _query(url, "SELECT workflow, step, attempts FROM failover_effects")
    steps: dict[str, list[str]] = {}
    repeats = 0
    for workflow, step, attempts in rows:
        steps.setdefault(str(workflow), []).append(str(step))
        repeats += int(str(attempts)) - 1
    for n in range(SAGAS):
        expected = ["reserve", "book"] if n % 2 == 0 else ["reserve", "release"]
        assert sorted(steps.get(f"trip-{n}", [])) == sorted(expected), (n, steps.get(f"trip-{n}"))
    assert len(rows) == 2 * SAGAS
    return repeats


def _step_commits(url: str, moment: float) -> tuple[float, float]:
    """The write outage as the steps saw it: the first pause of over a second between two step
    commits from the last one before ``moment`` (epoch) on, and the seconds from ``moment`` to
    the first step committed after that pause (on the new or restarted leader)."""
    rows = _query(
        url,
        "SELECT extract(epoch FROM pg_xact_commit_timestamp(xmin)) AS at FROM sagaway.steps"
        " WHERE status = 'COMPLETED' ORDER BY at",
    )
    times = [float(str(at)) for (at,) in rows if at is not None]
    before = [at for at in times if at <= moment][-1:]
    span = before + [at for at in times if at > moment]
    # The outage is the first pause of over a second (100 sagas under way commit steps many
    # times a second; a later pause can be a suspended saga's retry, not the outage).
    gaps = [(b - a, b) for a, b in itertools.pairwise(span) if b - a > 1.0]
    pause, resumed = gaps[0] if gaps else (0.0, span[1] if len(span) > 1 else moment)
    return resumed - moment, pause


_PROBE_TABLE = "CREATE TABLE IF NOT EXISTS public.failover_probe (at TIMESTAMPTZ)"


def _writable_again(url: str, moment: float) -> float:
    """Seconds from ``moment`` until a commit through ``url`` succeeds (the cluster's part of
    the outage, with libpq's choice of host; a synchronous commit waits for the standby)."""
    while time.time() - moment < 120:
        try:
            with psycopg.connect(url, connect_timeout=1, autocommit=True) as conn:
                conn.execute("INSERT INTO public.failover_probe VALUES (clock_timestamp())")
            return time.time() - moment
        except psycopg.OperationalError:
            time.sleep(0.05)
    return float("inf")


async def run_sagas(
    cluster: Cluster,
    disrupt: Callable[[list[subprocess.Popen[str]]], tuple[list[subprocess.Popen[str]], float]],
    *,
    what: str,
    workers: int = 2,
    worker_args: tuple[str, ...] = (),
) -> None:
    """100 sagas on ``workers`` processes; ``disrupt(workers)`` (in a thread) once
    ``DISRUPT_AFTER`` side effects are recorded; it returns the workers to stop at the end and
    when (``time.time()``) the database was disrupted."""
    url = cluster.url + "&schema=sagaway"
    plain = cluster.url
    await asyncio.to_thread(_query, plain, failover_app.EFFECTS)
    await asyncio.to_thread(_query, plain, _PROBE_TABLE)
    client = failover_app.build(url)
    async with client.connect():  # creates the schema
        pass
    procs = [start_worker(url, *worker_args) for _ in range(workers)]
    began = time.monotonic()
    try:
        async with client.connect():
            runs = asyncio.gather(*(_run_one(client, n) for n in range(SAGAS)))
            await _effects_reach(plain, DISRUPT_AFTER)
            procs, moment = await asyncio.to_thread(disrupt, procs)
            writable = asyncio.ensure_future(asyncio.to_thread(_writable_again, plain, moment))
            outcomes = await runs
            cluster_back = await writable
    finally:
        stop_workers(procs)
    took = time.monotonic() - began
    expected = [("COMPLETED" if n % 2 == 0 else "FAILED") for n in range(SAGAS)]
    assert [status for status, _ in outcomes] == expected
    repeats = await asyncio.to_thread(_check_effects, plain)
    first, pause = await asyncio.to_thread(_step_commits, plain, moment)
    leader = await asyncio.to_thread(cluster.leader)
    print(
        f"\n{what}: {SAGAS}/{SAGAS} sagas ended as signalled in {took:.1f}s; steps "
        f"committed again {first:.2f}s after the disruption (a pause of {pause:.2f}s; a "
        f"synchronous commit through the URL first succeeded after {cluster_back:.2f}s); "
        f"leader now {leader.name}; "
        f"repeated side-effect attempts (same key): {repeats}"
    )


async def test_leader_postmaster_killed(cluster: Cluster) -> None:
    leader = cluster.leader()

    def disrupt(procs: Workers) -> tuple[Workers, float]:
        moment = time.time()
        os.kill(leader.postmaster_pid(), signal.SIGKILL)
        return procs, moment

    await run_sagas(cluster, disrupt, what="leader's postmaster killed -9")


async def test_leader_node_killed(cluster: Cluster) -> None:
    leader = cluster.leader()

    def disrupt(procs: Workers) -> tuple[Workers, float]:
        moment = time.time()
        kill_node(leader)
        return procs, moment

    await run_sagas(cluster, disrupt, what="leader node (Patroni and PostgreSQL) killed -9")
    assert cluster.leader() is not leader


async def test_switchover(cluster: Cluster) -> None:
    leader = cluster.leader()
    replica = next(node for node in cluster.nodes if node is not leader)

    def disrupt(procs: Workers) -> tuple[Workers, float]:
        moment = time.time()
        cluster.switchover(leader, replica)
        return procs, moment

    await run_sagas(cluster, disrupt, what="switchover")
    assert cluster.leader() is replica


LEASE = 3.0


async def test_failover_during_recovery(cluster: Cluster) -> None:
    leader = cluster.leader()
    url = cluster.url + "&schema=sagaway"
    args = ("0.5", str(LEASE))  # recovery_interval, lease_timeout

    def disrupt(procs: Workers) -> tuple[Workers, float]:
        (only,) = procs
        only.kill()  # the only worker dies with its sagas under way
        only.wait()
        stop_workers([only])
        time.sleep(LEASE + 0.5)  # its leases expire: a new worker's recovery takes them over
        # A new worker starts, and its recovery claims and re-drives the orphaned sagas as
        # the leader is killed: the scan and the runs it began meet the failover.
        new = start_worker(url, *args)
        moment = time.time()
        os.kill(leader.postmaster_pid(), signal.SIGKILL)
        return [new], moment

    await run_sagas(
        cluster, disrupt, what="worker killed, leader killed as recovery starts", workers=1,
        worker_args=args,
    )  # fmt: skip
