"""The cost of claiming with many starts due: ``Store.claim_due`` (limit 1, then given back by
ending the claimed run) over N PENDING starts, and the cost of creating them.

    python -m benchmarks.claim_cost --db sqlite --db postgres --due 10000 --claims 200

Reports, per database, the CPU time (process, not wall: the machine is shared) and wall time
per start created and per claim (median of the claims), with the starts all due at once: the
worst case of a saturated worker whose queue of starts is 10,000 long. The starts are created
with the default priority and no fairness key (what every start was before priorities), so the
same script measures the code before and after them.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid

from sagaway.store import open_store
from sagaway.store.records import NewWorkflow

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


async def _measure(url: str, due: int, claims: int) -> dict[str, float]:
    store = open_store(url)
    await store.open()
    try:
        now = time.time()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for i in range(due):
            key = f"bench-{i:06d}"
            new = NewWorkflow(
                run_id=uuid.uuid4().hex, key=key, name="bench", args="{}", args_hash="x"
            )
            await store.create_workflow(new, now=now, lease=None, replace_live=False)
        create_cpu = (time.process_time() - cpu0) / due
        create_wall = (time.perf_counter() - wall0) / due
        cpu_times, wall_times = [], []
        for _ in range(claims):
            cpu0, wall0 = time.process_time(), time.perf_counter()
            got = await store.claim_due(
                owner="bench", now=now + 1, lease_timeout=60, limit=1, exclude=()
            )
            cpu_times.append(time.process_time() - cpu0)
            wall_times.append(time.perf_counter() - wall0)
            assert len(got) == 1
        return {
            "create_cpu_ms": create_cpu * 1000,
            "create_wall_ms": create_wall * 1000,
            "claim_cpu_ms": statistics.median(cpu_times) * 1000,
            "claim_wall_ms": statistics.median(wall_times) * 1000,
        }
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", action="append", choices=["sqlite", "postgres"])
    parser.add_argument("--due", type=int, default=10_000)
    parser.add_argument("--claims", type=int, default=200)
    parser.add_argument("--postgres-url", default=PG_URL)
    args = parser.parse_args()
    for db in args.db or ["sqlite"]:
        with tempfile.TemporaryDirectory() as tmp:
            if db == "sqlite":
                url = f"sqlite:///{tmp}/claim.db"
            else:
                url = f"{args.postgres_url}?schema=bench_claim_{uuid.uuid4().hex[:8]}"
            result = asyncio.run(_measure(url, args.due, args.claims))
            if db == "postgres":
                asyncio.run(_drop_schema(args.postgres_url, url.rsplit("=", 1)[1]))
        shown = ", ".join(f"{k} {v:.3f}" for k, v in result.items())
        print(f"{db}: due {args.due}, claims {args.claims}: {shown}", flush=True)


async def _drop_schema(base: str, schema: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(base, autocommit=True) as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
