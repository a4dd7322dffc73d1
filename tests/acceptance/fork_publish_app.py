"""The fork-publications kill -9 test's application, run as its own process:

    python fork_publish_app.py DB_URL MODE

MODE "source": run ``rep``, which publishes (a stream's two items, a search attribute, an event)
in steps 1-3 and fails at step 4, until it has FAILED; print FAILED.
MODE "victim": fork ``rep`` from step 4 as ``rep-fixed``; the fork's transaction is held inside,
after the steps and the stream items were copied and before the search attributes are: print
COPYING there, and block (to be killed with SIGKILL before the transaction commits).
MODE "rescue": print NO FORK if ``rep-fixed`` does not exist, fork ``rep`` again, run the fork
to its end and print what it has: RESULT, STREAM, EVENT and ATTRIBUTES (JSON).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import sagaway as sw
from sagaway.store import _fork

DB_URL, MODE = sys.argv[1:3]

manager = sw.Manager(DB_URL, lease_timeout=1.0, poll_interval=0.05, recovery_interval=0.2)


class CheckBug(sw.CompletableError):
    """The check (step 4) has a bug in the source's run."""


@manager.register_activity(name="check")
async def check() -> str:
    if MODE == "source":
        raise CheckBug("bug in step 4", code="BUG")
    return "checked"


@manager.register_workflow(name="report")
async def report() -> str:
    await sw.write_stream("log", "a", "b")  # step 1
    await sw.set_search_attributes(stage="written")  # step 2
    await sw.set_event("phase", "written")  # step 3
    checked = await manager.activity(check).execute_get()  # step 4
    await sw.write_stream("log", checked)
    await sw.set_event("phase", "done")
    return checked


def _hold(fork: _fork.Fork, rows: Sequence[Any]) -> list[dict[str, Any]]:
    """In the victim, the fork's transaction stops here: steps and stream items copied, the
    search attributes not yet, nothing committed."""
    print("COPYING", flush=True)
    time.sleep(3600)  # killed here (the writer thread on SQLite, the event loop on PostgreSQL)
    raise AssertionError("not killed")


async def main() -> None:
    async with manager:
        if MODE == "source":
            try:
                await manager.workflow(report).execute_get(idempotency_key="rep")
            except CheckBug:
                print("FAILED", flush=True)
            return
        if MODE == "victim":
            _fork.Fork.copied_attributes = _hold  # type: ignore[method-assign]
            await manager.fork("rep", from_step=4, new_key="rep-fixed")
            raise AssertionError("the fork committed")
        try:
            await manager.get_workflow("rep-fixed").status()
        except sw.WorkflowNotFound:
            print("NO FORK", flush=True)
        handle = await manager.fork("rep", from_step=4, new_key="rep-fixed")
        print("RESULT " + json.dumps(await handle.result(timeout=60)), flush=True)
        stream = [[i.offset, i.value] async for i in handle.read_stream("log")]
        print("STREAM " + json.dumps(stream), flush=True)
        print("EVENT " + json.dumps(await handle.get_event("phase")), flush=True)
        print("ATTRIBUTES " + json.dumps(await handle.search_attributes()), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
