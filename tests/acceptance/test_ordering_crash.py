"""Per-key order through a kill -9: 20 executions of one ordering key, started by two starter
processes at once (interleaved), run by three `sagaway worker` processes. The head of the line
waits for a signal until every start is in (the line stays blocked behind it); the worker
running post 7 is killed with SIGKILL in the middle of it. The side log (appended by every
process as the posts run) shows one post at a time, in the order of the line (the places the
database gave the starts), post 7 taken over after its lease expired and nothing run behind it
meanwhile.

And debounced starts of one burst from two starter processes at once (25 each): every start is
given the one run, which is the only execution of the key, and a start retried with a key
that joined finds it. And a burst of 100 debounced starts from a starter process, run by two
`sagaway worker` processes once the burst is over: one run, with the last start's argument,
taken over after the worker running it is killed (SIGKILL)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path

import pytest

import sagaway as sw
from tests.processes import app_env, process_of, running, spawn, until, worker

pytestmark = pytest.mark.long  # starts real processes: run by `pytest -m long`

APP = "tests.acceptance.ordering_crash_app"


async def _reaches(client: sw.Manager, key: str, status: sw.WorkflowStatus, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while await client.get_workflow(key).status() is not status:
        assert time.monotonic() < deadline, f"{key} never reached {status}"
        await asyncio.sleep(0.05)


@pytest.mark.slow
async def test_a_line_keeps_its_order_through_a_kill(db_url: str, tmp_path: Path) -> None:
    log, marker = tmp_path / "log", tmp_path / "marker"
    env = app_env(ORDER_DB_URL=db_url, ORDER_LOG=str(log), ORDER_MARKER=str(marker))
    from tests.acceptance import ordering_crash_app as app

    app.manager.url = db_url
    async with app.manager.connect() as client:
        await client.workflow(app.post, 0).execute(idempotency_key="post-0", ordering_key="acct")
        with running(*(worker(env, f"{APP}:manager") for _ in range(3))) as workers:
            await _reaches(client, "post-0", sw.WorkflowStatus.WAITING, 60)
            odd, even = ("1", "2", "10"), ("2", "2", "9")
            starters = [spawn(env, "-m", APP, *numbers) for numbers in (odd, even)]
            for starter in starters:  # posts 1..19, from two processes at once
                _, err = await asyncio.to_thread(starter.communicate, timeout=120)
                assert starter.returncode == 0, err.decode()
            await client.signal("go").send("post-0", None)
            await until(lambda: marker.exists() and marker.read_text(), 60)
            holder = process_of(workers, marker)
            holder.send_signal(signal.SIGKILL)
            killed_at = time.time()
            holder.wait(10)
            handles = [client.get_workflow(f"post-{n}") for n in range(20)]
            results = await asyncio.wait_for(
                asyncio.gather(*(h.result() for h in handles)), timeout=180
            )
            line = await client.list_workflows(ordering_key="acct", limit=100)
    assert sorted(results) == list(range(20))
    order = [int(d.key.removeprefix("post-")) for d in sorted(line, key=_seq)]
    assert order[0] == 0 and sorted(order) == list(range(20))
    entries = [line.split() for line in log.read_text().splitlines()]
    ran = [(what, int(n)) for what, n, _ in entries]
    # Post 7 began twice (killed, then taken over after its lease expired), nothing between.
    again = [i for i, entry in enumerate(ran) if entry == ("begin", app.KILLED_AT)]
    assert len(again) == 2 and again[1] == again[0] + 1
    assert float(entries[again[1]][2]) > killed_at
    del ran[again[1]]
    assert ran == [(what, n) for n in order for what in ("begin", "end")]


def _seq(d: sw.WorkflowDescription) -> int:
    assert d.ordering_seq is not None
    return d.ordering_seq


@pytest.mark.slow
async def test_debounced_starts_from_two_processes_make_one_run(db_url: str) -> None:
    env = app_env(ORDER_DB_URL=db_url)
    # 25 debounced starts of one burst each (every other number from 0 and 1): run ids out.
    starters = [
        spawn(env, "-m", APP, first, "2", "25", "debounce", stdout=subprocess.PIPE)
        for first in ("0", "1")
    ]
    given = []
    for starter in starters:
        out, err = await asyncio.to_thread(starter.communicate, timeout=120)
        assert starter.returncode == 0, err.decode()
        given.extend(out.decode().split())
    assert len(given) == 50 and len(set(given)) == 1  # every start: the one run
    from tests.acceptance import ordering_crash_app as app

    app.manager.url = db_url
    async with app.manager.connect() as client:
        burst = await client.list_workflows(debounce_key="inbox")
        again = await client.workflow(app.digest, 99).execute(
            idempotency_key="digest-17", debounce_key="inbox", debounce=3600.0
        )
    assert [d.run_id for d in burst] == given[:1] and burst[0].status is sw.WorkflowStatus.PENDING
    assert again.run_id == given[0]


@pytest.mark.slow
async def test_a_burst_of_100_runs_once_with_the_last_arguments_through_a_kill(
    db_url: str, tmp_path: Path
) -> None:
    """100 debounced starts (``roundup`` 0..99, one after another, each well within the
    debounce of the one before) while two workers run: every start is given one run, which
    starts once the burst is over (``BURST_WAIT`` after the last) with the last start's
    argument, 99. Its activity's first attempt hangs; that worker is killed, and the other takes
    the run over once its lease expires: it ends COMPLETED with 99, the key's only execution.
    The log shows only 99 collected, first by the killed worker (a live worker whose lease
    lapsed under load could log it once more, after the takeover: never another number)."""
    log, marker = tmp_path / "log", tmp_path / "marker"
    env = app_env(ORDER_DB_URL=db_url, ORDER_LOG=str(log), ORDER_MARKER=str(marker))
    from tests.acceptance import ordering_crash_app as app

    app.manager.url = db_url
    async with app.manager.connect() as client:
        with running(*(worker(env, f"{APP}:manager") for _ in range(2))) as workers:
            starter = spawn(env, "-m", APP, "0", "1", "100", "burst", stdout=subprocess.PIPE)
            out, err = await asyncio.to_thread(starter.communicate, timeout=180)
            assert starter.returncode == 0, err.decode()
            given = out.decode().split()
            assert len(given) == 100 and len(set(given)) == 1  # every start: the one run
            await until(lambda: marker.exists() and marker.read_text(), 60)
            holder = process_of(workers, marker)
            holder.send_signal(signal.SIGKILL)
            holder.wait(10)
            result = await asyncio.wait_for(client.get_workflow("roundup-0").result(), 120)
            burst = await client.list_workflows(debounce_key="tally", limit=200)
    assert result == 99
    assert [(d.run_id, d.status) for d in burst] == [(given[0], sw.WorkflowStatus.COMPLETED)]
    collected = [line.split()[:3] for line in log.read_text().splitlines()]
    assert {n for _, n, _ in collected} == {"99"} and len(collected) >= 2
    assert collected[0][2] == str(holder.pid)
    assert all(pid != str(holder.pid) for _, _, pid in collected[1:])
