"""A worker process for tests/integration/test_patroni_failover.py: a Manager on the Patroni
cluster's multi-host URL that runs the ``trip`` saga until its stdin closes.

    python -m tests.integration.failover_app URL

It prints ``ready`` once its Manager runs.

``trip(n)``: reserve (compensated by ``release``), a durable timer, then a signal ``go``: True
books and completes; False fails the saga with a completable error after the compensation ran.
Each step's side effect is a row of ``failover_effects`` keyed by the step's idempotency key
(the same for every attempt): a repeated attempt counts up ``attempts`` on the one row instead
of adding a second, as an external system that honours idempotency keys would.
"""

from __future__ import annotations

import asyncio
import sys

import psycopg

import sagaway as sw

TIMER = 0.5
"""Seconds of the saga's durable timer."""
EFFECTS = """
CREATE TABLE IF NOT EXISTS public.failover_effects (
    idem_key TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    step     TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 1
)
"""
_RECORD = """
INSERT INTO public.failover_effects (idem_key, workflow, step) VALUES (%s, %s, %s)
ON CONFLICT (idem_key) DO UPDATE SET attempts = failover_effects.attempts + 1
"""
# Retried through the failover (a side effect that met the outage is tried again).
_RETRY = sw.RetryPolicy(initial_interval=0.2, maximum_interval=1.0, maximum_attempts=100)


def libpq_url(url: str) -> str:
    """The cluster's URL without Sagaway's own parameters."""
    base, _, query = url.partition("?")
    kept = [p for p in query.split("&") if p.startswith("target_session_attrs=")]
    return base + ("?" + "&".join(kept) if kept else "")


def build(url: str, *, recovery_interval: float = 10.0, lease_timeout: float = 30.0) -> sw.Manager:
    m = sw.Manager(
        url,
        poll_interval=0.5,
        concurrency=60,
        recovery_interval=recovery_interval,
        lease_timeout=lease_timeout,
        unavailable_timeout=120.0,
    )
    target = libpq_url(url)

    async def effect(step: str) -> None:
        info = sw.activity_info()
        try:
            conn = await psycopg.AsyncConnection.connect(target, connect_timeout=3, autocommit=True)
            async with conn:
                await conn.execute(_RECORD, (info.idempotency_key, info.workflow_key, step))
        except psycopg.OperationalError as exc:  # the failover: try again (same key)
            raise sw.RetryableError(f"{step}: {exc}") from exc

    @m.register_activity(name="reserve", retry=_RETRY)
    async def reserve(n: int) -> str:
        await effect("reserve")
        return f"seat-{n}"

    @m.register_activity(name="release", retry=_RETRY)
    async def release(seat: str) -> None:
        await effect("release")

    @m.register_activity(name="book", retry=_RETRY)
    async def book(seat: str) -> str:
        await effect("book")
        return f"booked {seat}"

    @m.register_workflow(name="trip")
    async def trip(n: int) -> str:
        async with sw.Saga() as saga:
            seat = await reserve(n)
            saga.add_compensation(release, seat)
            await m.sleep(TIMER)
            go = await m.signal("go").receive(bool, timeout=300)
            if not go:
                raise sw.CompletableError(f"trip {n} declined", code="declined")
            return await book(seat)

    return m


async def main(url: str, recovery_interval: float, lease_timeout: float) -> None:
    manager = build(url, recovery_interval=recovery_interval, lease_timeout=lease_timeout)
    async with manager:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.read)  # returns when the test closes our stdin


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(
        main(
            args[0],
            float(args[1]) if len(args) > 1 else 10.0,
            float(args[2]) if len(args) > 2 else 30.0,
        )
    )
