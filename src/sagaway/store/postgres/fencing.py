"""Fenced writes on PostgreSQL: a write, or a row lock, that holds only while the caller's lease
token owns the execution; on a retry after a lost acknowledgement, the lost attempt's own outcome
is recognised instead of raising ``LeaseLost``."""

from __future__ import annotations

from typing import Any

from sagaway import errors
from sagaway.store.postgres.conn import Conn, Q, exists


async def fenced(
    conn: Conn, query: str, params: dict[str, Any], retried: bool, *, done_as: str
) -> bool:
    """A write fenced by the lease token: True if it changed the owned row; on a retry, False if
    the attempt whose acknowledgement was lost did (query ``done_as``); else ``LeaseLost``."""
    if (await conn.execute(Q[query], params)).rowcount == 1:
        return True
    if retried and await exists(conn, done_as, params):
        return False
    raise errors.LeaseLost(params["run_id"])


async def lock_owned(conn: Conn, run_id: str, token: str, *, waited: dict[str, Any] | None) -> bool:
    """Lock the row of ``run_id`` if ``token`` owns it: True. Otherwise False if ``waited`` (the
    parameters of ``waiting_as``, on a retry that would start a wait) finds the wait the lost
    attempt started, else ``LeaseLost``."""
    if await exists(conn, "lock_owned", {"run_id": run_id, "token": token}):
        return True
    if waited is not None and await exists(conn, "waiting_as", waited):
        return False
    raise errors.LeaseLost(run_id)
