"""RecentEnds: the ended executions a process remembers for result() stay bounded in bytes."""

from __future__ import annotations

from sagaway._engine.recent import RECORD_OVERHEAD, RecentEnds
from sagaway.states import WorkflowStatus
from sagaway.store.records import WorkflowRecord


def _ended(i: int, *, args: int = 0, result: int = 0, error: int = 0) -> WorkflowRecord:
    return WorkflowRecord(
        run_id=f"run-{i}",
        key=f"k-{i}",
        name="wf",
        args='"' + "a" * args + '"',
        args_hash="h",
        status=WorkflowStatus.COMPLETED,
        result='"' + "r" * result + '"' if result else None,
        error='"' + "e" * error + '"' if error else None,
        parent_key=None,
        created_at=0.0,
        updated_at=1.0,
        ended_at=1.0,
        lease_owner=None,
        lease_expires_at=None,
        next_run_at=None,
        suspend_count=0,
    )


def _held(recent: RecentEnds, count: int) -> int:
    """Bytes of payload the kept records really hold (args, result, error)."""
    total = 0
    for i in range(count):
        record = recent.get(f"run-{i}")
        if record is not None:
            total += len(record.args) + len(record.result or "") + len(record.error or "")
    return total


def test_large_payloads_are_not_kept_and_arguments_never() -> None:
    recent = RecentEnds(max_bytes=1024 * 1024, max_record_bytes=64 * 1024)
    for i in range(200):  # 1 MiB of arguments and of result each: 400 MiB if all were kept
        recent.add(_ended(i, args=1 << 20, result=1 << 20))
    assert len(recent) == 0 and recent.bytes == 0 and _held(recent, 200) == 0
    recent.add(_ended(500, args=1 << 20, result=100))
    kept = recent.get("run-500")
    assert kept is not None and kept.args == "" and kept.result == '"' + "r" * 100 + '"'


def test_bytes_held_stay_under_the_bound_oldest_dropped_first() -> None:
    bound = 256 * 1024
    recent = RecentEnds(max_bytes=bound, max_record_bytes=64 * 1024)
    for i in range(1000):
        recent.add(_ended(i, result=30_000, error=i % 3 * 1000))
        assert recent.bytes <= bound
        assert _held(recent, i + 1) <= recent.bytes
    assert "run-999" in recent and "run-0" not in recent
    # Each holds ~30 KB of result plus the overhead: the bound, not the count, limits them.
    assert 0 < len(recent) <= bound // (30_002 + RECORD_OVERHEAD)


def test_count_bound_and_re_adding_a_run_replaces_it() -> None:
    recent = RecentEnds(max_count=10)
    for i in range(25):
        recent.add(_ended(i, result=10))
    assert len(recent) == 10 and "run-24" in recent and "run-14" not in recent
    before = recent.bytes
    recent.add(_ended(24, result=10))
    assert len(recent) == 10 and recent.bytes == before
