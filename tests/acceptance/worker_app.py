"""An application for the `sagaway worker` tests. Env: WORKER_DB_URL, WORKER_DIR.

The activity announces itself by creating <WORKER_DIR>/entered-<key> and then waits for the file
<WORKER_DIR>/open-<key> to exist.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import sagaway as sw

DIR = Path(os.environ["WORKER_DIR"])
manager = sw.Manager(os.environ["WORKER_DB_URL"], lease_timeout=120.0, poll_interval=0.05)


@manager.register_activity(name="gated")
async def gated(key: str) -> str:
    (DIR / f"entered-{key}").write_text(str(os.getpid()))
    while not (DIR / f"open-{key}").exists():  # noqa: ASYNC110 - another process opens the gate
        await asyncio.sleep(0.01)
    return f"done by {os.getpid()}"


@manager.register_workflow(name="gated_flow")
async def gated_flow(key: str) -> str:
    return await gated(key)
