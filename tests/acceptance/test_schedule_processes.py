"""Three worker processes (real processes, real clock) share one database and a schedule every
second: each tick is started by exactly one of them, none is skipped while they run, and each
execution runs once."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import sys
from pathlib import Path

import pytest

import sagaway as sw
from sagaway.store.records import ListQuery

pytestmark = pytest.mark.long  # starts real processes: run by `pytest -m long`

ROOT = Path(__file__).resolve().parents[2]
RUN_FOR = 3.5
"""Seconds each process runs once open."""


async def _process(db_url: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.acceptance.schedule_app", db_url, str(RUN_FOR),
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def test_three_processes_one_execution_per_tick(db_url: str) -> None:
    processes = [await _process(db_url) for _ in range(3)]
    outputs = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in processes)), 60)
    reports = []
    for process, (out, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err.decode()[-2000:]
        reports.append(json.loads(out.decode().strip().splitlines()[-1]))

    async with sw.Manager(db_url).connect(create=False) as manager:
        store = manager._require_engine().store
        found = await store.list_page(ListQuery(limit=1000, key_prefix="schedule:every-second:"))
    keys = sorted(r.key for r in found)
    ticks = [sw_tick(k) for k in keys]
    # One execution per tick, every tick from the first to the last (none skipped).
    assert len(keys) >= 3
    assert ticks == list(range(ticks[0], ticks[0] + len(ticks)))
    # Each tick won by exactly one scheduler, whichever process it was in.
    assert sum(r["fired"] for r in reports) == len(keys)
    # Each execution run at most once (those started as the last process left may be pending).
    ran = [key for r in reports for key in r["ran"]]
    assert len(ran) == len(set(ran)) and set(ran) <= set(keys)
    assert len(ran) >= len(keys) - 2


def sw_tick(key: str) -> int:
    """The tick of ``schedule:every-second:2026-…Z`` as epoch seconds."""
    stamp = key.removeprefix("schedule:every-second:")
    return int(datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S%z").timestamp())
