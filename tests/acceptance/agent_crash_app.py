"""The travel agent of examples/travel_agent in a process of its own, for kill -9 tests.

``python agent_crash_app.py DB_URL MODE KEY DIR``: starts the trip under KEY and, with MODE
``model``, prints ``IN_MODEL`` once the third model request is in flight (flight and hotel
booked) and holds it there; with MODE ``waiting``, prints ``WAITING`` once the run waits for
the car's approval. Either way it then waits to be killed. Every model request the function
model receives is appended to DIR/requests.txt, every booking to DIR/ledger.txt.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from typing import Any

import sagaway as sw

ROOT = Path(__file__).resolve().parents[2]


def load_travel() -> Any:
    # Loaded once per process: its error classes are found by module name when a recorded
    # error is read back, so every test must raise and catch the same ones.
    if "example_travel_agent" in sys.modules:
        return sys.modules["example_travel_agent"]
    path = ROOT / "examples" / "travel_agent" / "app.py"
    spec = importlib.util.spec_from_file_location("example_travel_agent", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module's annotations
    spec.loader.exec_module(module)
    return module


travel = load_travel()


def make(db_url: str, folder: Path, hold_at: int | None = None) -> tuple[sw.Manager, Any, Any]:
    """A Manager with the travel agent, counting model requests in ``folder``; request
    ``hold_at`` is announced (``IN_MODEL``) and never answered."""
    manager = sw.Manager(db_url, lease_timeout=1.0, poll_interval=0.05)

    async def on_request(n: int) -> None:
        with (folder / "requests.txt").open("a") as out:
            out.write(f"{n}\n")
        if n == hold_at:
            print("IN_MODEL", flush=True)
            await asyncio.Event().wait()

    agency = travel.Agency(folder / "ledger.txt")
    workflow = travel.build(manager, agency, travel.scripted_model(on_request))
    return manager, agency, workflow


async def main(db_url: str, mode: str, key: str, folder: Path) -> None:
    manager, _, plan_trip = make(db_url, folder, hold_at=2 if mode == "model" else None)
    async with manager:
        handle = await manager.workflow(plan_trip, "Porto").execute(idempotency_key=key)
        if mode == "waiting":
            while True:
                if (await handle.status()) is sw.WorkflowStatus.WAITING:
                    break
                await asyncio.sleep(0.02)
            print("WAITING", flush=True)
        await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])))
