"""Claiming due work on PostgreSQL (``PostgresStore.claim_due`` and ``next_due``).

Many processes claim at once: ``FOR UPDATE SKIP LOCKED`` hands each one disjoint rows. A claim
takes only executions of the worker's task queues and code versions (see ``_params``). Tokens
are derived from one random base per claim, numbered on across its attempts: after a lost
acknowledgement the retry finds the executions an earlier attempt took by their tokens, instead of
stranding them.
"""

from __future__ import annotations

import contextlib

from psycopg.rows import DictRow, dict_row

from sagaway.randomness import new_id
from sagaway.store import _params, _rows
from sagaway.store.postgres.conn import Conn, Params, Q, Run, json_list, named
from sagaway.store.records import Lease, WorkflowRecord

Claimed = list[tuple[WorkflowRecord, Lease]]


def due_filter(due: _params.Due) -> Params:
    """The task queue and code version parameters of ``claim_due`` and ``next_due``."""
    return {
        "any_queue": due.queues is None,
        "queues": sorted(due.queues or ()),
        **_params.version_filter(due.versions, arrays=True),
    }


async def claim_due(run: Run, claim: _params.Claim) -> Claimed:
    """Leases on up to ``limit`` due executions (see ``Store.claim_due``)."""
    if claim.limit <= 0:
        return []
    params: Params = {
        "now": claim.now,
        "exclude": json_list(claim.exclude),
        "owner": claim.due.owner,
        "expires_at": claim.now + claim.lease_timeout,
        **due_filter(claim.due),
    }
    return await run(_Claim(params, claim.limit).op, transaction=False)


class _Claim:
    """One claim, over its attempts. The n-th execution an attempt takes gets the token
    base + (offset + n): unique, and known to a retry, without a token per free slot made and
    sent with every claim."""

    def __init__(self, params: Params, limit: int) -> None:
        self.params = {**params, "token_base": f"{new_id()}."}
        self.limit = limit
        self.made = 0  # attempts begun: the next numbers its tokens from made * limit

    async def op(self, conn: Conn, retried: bool) -> Claimed:
        try:
            return await self._attempt(conn, retried)
        except BaseException:
            # Ended here rather than by the pool (which would warn of a connection returned
            # inside a transaction); on a broken connection there is nothing left to end.
            with contextlib.suppress(Exception):
                await conn.execute(b"ROLLBACK")
            raise

    async def _attempt(self, conn: Conn, retried: bool) -> Claimed:
        limit, params = self.limit, self.params
        offset, self.made = self.made * limit, self.made + 1
        cur = conn.cursor(row_factory=dict_row)
        claimed: Claimed = []
        if retried and offset:
            await conn.execute(b"BEGIN")
            earlier = [f"{params['token_base']}{n}" for n in range(1, offset + 1)]
            claimed = await _taken_before(conn, earlier, params["owner"])
            if len(claimed) < limit:
                more = {**params, "limit": limit - len(claimed), "token_offset": offset}
                await cur.execute(Q["claim_due"], more)
        else:
            # BEGIN and the claim in one round trip (conn.transaction() waits for BEGIN alone).
            async with conn.pipeline():
                await conn.execute(b"BEGIN")
                await cur.execute(Q["claim_due"], {**params, "limit": limit, "token_offset": 0})
        rows = await cur.fetchall() if len(claimed) < limit else []
        rows.sort(key=lambda row: int(row["n"]))  # the order of next_run_at, run_id
        rows = await _within_key_limits(conn, rows)
        await conn.execute(b"COMMIT")
        claimed.extend(
            (
                _rows.claimed_from_row(row),
                Lease(row["lease_token"], params["owner"], params["expires_at"]),
            )
            for row in rows
        )
        return claimed


async def _within_key_limits(conn: Conn, rows: list[DictRow]) -> list[DictRow]:
    """The claimed rows, less those that started an execution beyond its per-key limit.

    The claim's filter counted the key's running executions without seeing concurrent claims
    (nor the other rows of this claim): the key is locked now (until commit, in key order, so
    concurrent claims take turns) and counted again, seeing what committed meanwhile and this
    claim's own rows; the excess is given back, PENDING again.
    """
    started: dict[str, list[DictRow]] = {}
    for row in rows:
        if row["concurrency_key"] is not None and row["previous_status"] == "PENDING":
            started.setdefault(row["concurrency_key"], []).append(row)
    given_back: set[str] = set()
    for key in sorted(started):
        params = {"concurrency_key": key}
        await conn.execute(Q["lock_concurrency_key"], params)
        (count,) = await named(conn, "running_with_key", params)
        excess = int(count["count"]) - min(int(r["concurrency_limit"]) for r in started[key])
        if excess > 0:
            given_back.update(r["run_id"] for r in started[key][-excess:])
    if not given_back:
        return rows
    await conn.execute(Q["unclaim"], {"run_ids": sorted(given_back)})
    return [row for row in rows if row["run_id"] not in given_back]


async def _taken_before(conn: Conn, tokens: list[str], owner: str) -> Claimed:
    """What an attempt whose acknowledgement was lost did claim, found by its tokens."""
    claimed: Claimed = []
    for row in await named(conn, "claimed_with", {"tokens": tokens}):
        record = _rows.workflow_from_row(row)
        assert record.lease_expires_at is not None
        claimed.append((record, Lease(row["lease_token"], owner, record.lease_expires_at)))
    return claimed


async def next_due(run: Run, due: _params.Due) -> float | None:
    """See ``Store.next_due``."""
    params = {"owner": due.owner, **due_filter(due)}

    async def op(conn: Conn, retried: bool) -> float | None:
        row = await (await conn.execute(Q["next_due"], params)).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    return await run(op, transaction=False)
