"""Cluster-wide queue limits on PostgreSQL (see ``_queue_limits``): an admission locks the
queue's ``queue_limits`` row (``FOR UPDATE``), so concurrent admissions to one queue take turns
while other queues are not held up."""

from __future__ import annotations

from typing import TypeVar

from sagaway.store._queue_limits import Slot, SQLQueueLimits, Waiter, decide
from sagaway.store.postgres.conn import Conn, Params, Q, Run, named

T = TypeVar("T")


async def pg_acquire(
    run: Run, slot: Slot, waiter: Waiter | None, concurrency: int | None, rate: float | None
) -> float | None:
    """See ``Store.acquire_queue_slot``; the queue's row is locked for the transaction."""
    params: Params = slot.params()

    async def op(conn: Conn, retried: bool) -> float | None:
        if await named(conn, "holds_queue_slot", params):
            return None  # admitted by an attempt whose acknowledgement was lost
        await conn.execute(Q["queue_limit_row"], params)
        (row,) = await named(conn, "lock_queue_limit", params)
        await conn.execute(Q["drop_expired_slots"], params)
        taken = int((await named(conn, "count_queue_slots", params))[0]["count"])
        line, ahead = await _in_line(conn, waiter)
        retry_at, spaced = decide(
            float(row["next_start_at"]),
            taken,
            concurrency=concurrency,
            rate=rate,
            now=slot.now,
            ahead=ahead,
        )
        if retry_at is not None:
            if line is not None:
                await conn.execute(Q["keep_waiter"], line.kept(line.since, retry_at).params())
            return retry_at
        if line is not None:
            await conn.execute(Q["drop_waiter"], line.params())
        await conn.execute(Q["take_queue_slot"], params)
        await conn.execute(Q["space_queue_starts"], {**params, "next_start_at": spaced})
        return None

    return await run(op, transaction=True)


async def _in_line(conn: Conn, waiter: Waiter | None) -> tuple[Waiter | None, int]:
    """``waiter`` as in line (since its first ask) and how many live waiters go before it
    (under the queue's row lock)."""
    if waiter is None:
        return None, 0
    await conn.execute(Q["drop_expired_waiters"], waiter.params())
    rows = await named(conn, "waiter_since", waiter.params())
    waiter = waiter.kept(float(rows[0]["since"]) if rows else None)
    ahead = int((await named(conn, "waiters_ahead", waiter.params()))[0]["count"])
    return waiter, ahead


async def pg_renew(run: Run, slot: Slot) -> bool:
    """See ``Store.renew_queue_slot``."""
    params: Params = slot.params()

    async def op(conn: Conn, retried: bool) -> bool:
        cur = await conn.execute(Q["renew_queue_slot"], params)
        return cur.rowcount == 1 or (
            retried and bool(await named(conn, "holds_queue_slot", params))
        )

    return await run(op, transaction=False)


async def pg_release(run: Run, slot: Slot) -> None:
    """See ``Store.release_queue_slot``."""

    async def op(conn: Conn, retried: bool) -> None:
        # After the admissions under way: one interrupted while its commit was on its way
        # (see ``ClusterLimit.admit``) holds the row until it lands, then its slot is seen.
        await conn.execute(Q["lock_queue_limit"], slot.params())
        if (await conn.execute(Q["release_queue_slot"], slot.params())).rowcount:
            await conn.execute(Q["wake_queue_waiter"], slot.wake())

    await run(op, transaction=True)


async def pg_leave(run: Run, slot: Slot, call: Params) -> None:
    """See ``Store.leave_queue``."""

    async def op(conn: Conn, retried: bool) -> None:
        if (await conn.execute(Q["drop_waiter"], call)).rowcount:
            await conn.execute(Q["wake_queue_waiter"], slot.wake())

    await run(op, transaction=True)


class QueueLimits(SQLQueueLimits):
    """The queue limit transactions of ``PostgresStore`` (the verbs: ``SQLQueueLimits``)."""

    def __init__(self, run: Run) -> None:
        self._run = run

    async def _acquire(
        self, slot: Slot, waiter: Waiter | None, concurrency: int | None, rate: float | None
    ) -> float | None:
        return await pg_acquire(self._run, slot, waiter, concurrency, rate)

    async def _renew(self, slot: Slot) -> bool:
        return await pg_renew(self._run, slot)

    async def _release(self, slot: Slot) -> None:
        await pg_release(self._run, slot)

    async def _leave(self, slot: Slot, call: Params) -> None:
        await pg_leave(self._run, slot, call)
