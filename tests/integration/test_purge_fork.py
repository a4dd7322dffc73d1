"""A fork that keeps the start of a child a purge has already deleted (found by the generative
test's SQLite soak: ``wf0-fork`` stayed SUSPENDED with ``WorkflowNotFound: no workflow with key
'shared-s'``).

A purge rightly takes a child once its parent (and every reader) has ended; the parent itself
is kept when it ended later than the purge's cutoff (it ran on after reading its child). A fork
of that parent from a step after the child's start but before its result keeps the start and
reads the child's end again: the child is gone. The purge did what retention says (nothing live
read the child when it ran); the fork must not be created as if it could run."""

from __future__ import annotations

from typing import Any

import pytest

import sagaway as sw
from sagaway.testing import FakeClock
from tests.integration.test_purge import LABEL, Declined, build_readers, keys
from tests.store_helpers import raw_sql

S = sw.WorkflowStatus


async def test_a_fork_keeping_the_start_of_a_purged_child_is_not_created_to_suspend(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child ``p-1/1`` ended an hour before its parent ``p-1`` failed; a purge of what ended
    more than 30 minutes ago takes the child, not the parent. A fork of the parent from step 2
    (keeping the child's start, step 1, not its result, step 2) is then refused with
    ``WorkflowNotFound`` naming the child, instead of creating a run that can only stay
    SUSPENDED with that error (as it did). ``plan_fork`` answers the same."""
    clock = FakeClock()
    monkeypatch.setitem(LABEL, "broken", True)
    async with build_readers(db_url, clock) as m:
        with pytest.raises(Declined):
            await m.workflow("parent", 4).execute_get(idempotency_key="p-1")
        # The child ended an hour before its parent did.
        raw_sql(db_url, "UPDATE workflows SET ended_at = ended_at - 3600 WHERE key = 'p-1/1'")
        await clock.advance(60.0)
        assert await m.purge(1800.0) == 1
        assert keys(db_url) == {"p-1"}
        monkeypatch.setitem(LABEL, "broken", False)
        with pytest.raises(sw.WorkflowNotFound, match=r"p-1/1.*a purge has deleted"):
            await m.plan_fork("p-1", from_step=2)  # keeps step 1, the child's start
        with pytest.raises(sw.WorkflowNotFound, match=r"p-1/1.*a purge has deleted"):
            await m.fork("p-1", from_step=2, new_key="p-1-fixed")
        assert keys(db_url) == {"p-1"}
        # From step 1 nothing is kept: the child starts anew under the fork's key space.
        fork = await m.fork("p-1", from_step=1, new_key="p-1-again")
        assert await fork.result(timeout=10) == "label-4"


async def test_a_purge_between_the_forks_look_and_its_insert_leaves_no_fork(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The purge commits after the fork looked at the child (it was there) and before the fork's
    transaction: the store makes no fork (it looks again in that transaction, and on
    PostgreSQL key-share locks what it finds), and the caller gets the same refusal."""
    clock = FakeClock()
    monkeypatch.setitem(LABEL, "broken", True)
    async with build_readers(db_url, clock) as m:
        with pytest.raises(Declined):
            await m.workflow("parent", 4).execute_get(idempotency_key="p-1")
        monkeypatch.setitem(LABEL, "broken", False)
        store = m._require_engine().store
        fork_workflow = store.fork_workflow

        async def purge_first(*args: Any, **kwargs: Any) -> Any:
            raw_sql(
                db_url,
                "DELETE FROM steps WHERE run_id IN "
                "(SELECT run_id FROM workflows WHERE key = 'p-1/1')",
            )
            raw_sql(db_url, "DELETE FROM workflows WHERE key = 'p-1/1'")
            return await fork_workflow(*args, **kwargs)

        monkeypatch.setattr(store, "fork_workflow", purge_first)
        with pytest.raises(sw.WorkflowNotFound, match=r"p-1/1.*a purge has deleted"):
            await m.fork("p-1", from_step=2, new_key="p-1-fixed")
        assert keys(db_url) == {"p-1"}
