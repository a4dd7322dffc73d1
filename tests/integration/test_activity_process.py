"""Activities and the worker process: ``sys.exit()`` in an activity does not end the process,
and a sync activity still blocked when the Manager closes does not hold up the process's exit."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path

import pytest

APP = textwrap.dedent(
    """
    import asyncio, json, sys, threading
    import sagaway as sw

    manager = sw.Manager(sys.argv[1], poll_interval=0.05)
    started = threading.Event()

    @manager.register_activity
    def leave() -> None:
        sys.exit(3)

    @manager.register_activity
    def block() -> None:
        started.set()
        threading.Event().wait(600)  # far longer than the test waits

    @manager.register_workflow
    async def quits() -> str:
        await leave()
        return "unreachable"

    @manager.register_workflow
    async def blocks() -> None:
        await block()

    @manager.register_workflow
    async def works(n: int) -> int:
        return n + 1

    async def until_suspended(handle):
        while (d := await handle.describe()).status is not sw.WorkflowStatus.SUSPENDED:
            await asyncio.sleep(0.01)
        return d

    async def main(mode: str) -> None:
        async with manager:
            if mode == "exit":
                bad = await manager.workflow(quits).execute(idempotency_key="bad")
                d = await asyncio.wait_for(until_suspended(bad), 30)
                good = await manager.workflow(works, 41).execute_get(idempotency_key="good")
                print(json.dumps({"bad": d.status.value, "error": d.error["type"], "good": good}))
            else:
                await manager.workflow(blocks).execute(idempotency_key="blocked")
                await asyncio.to_thread(started.wait, 30)
        print("closed", flush=True)

    asyncio.run(main(sys.argv[2]))
    """
)


async def _spawn(tmp_path: Path, db_url: str, mode: str) -> asyncio.subprocess.Process:
    script = tmp_path / "activity_app.py"
    script.write_text(APP)
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        db_url,
        mode,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.mark.slow
async def test_sys_exit_in_a_sync_activity_leaves_the_process_serving(
    db_url: str, tmp_path: Path
) -> None:
    proc = await _spawn(tmp_path, db_url, "exit")
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[-1] == "closed"
    assert json.loads(lines[0]) == {
        "bad": "SUSPENDED",
        "error": "sagaway.errors.ActivityAborted",
        "good": 42,
    }


@pytest.mark.slow
async def test_process_exit_does_not_wait_for_a_blocked_sync_activity(
    db_url: str, tmp_path: Path
) -> None:
    proc = await _spawn(tmp_path, db_url, "block")
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line == b"closed\n"
        # The activity blocks for 600 s; the process must not wait for it.
        await asyncio.wait_for(proc.wait(), 20)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0
