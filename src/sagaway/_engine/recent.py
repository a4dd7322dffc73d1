"""RecentEnds: executions that ended in this process lately, so ``result()`` needs no read.

Bounded by count and by the bytes of what it holds, not by count alone: with large results, ten
thousand remembered ends were hundreds of MiB. Arguments are never kept (``result()`` does not
need them), and a result or error too large to keep is not kept at all: ``result()`` then reads
the execution back from the store, as it does for an end it never saw.
"""

from __future__ import annotations

import collections
import dataclasses

from sagaway.store.records import WorkflowRecord

RECORD_OVERHEAD = 512
"""Bytes counted for a record besides its result, error, key and name (ids, the entry)."""


class RecentEnds:
    """A least-recently-ended cache of ended ``WorkflowRecord``\\s by run id."""

    def __init__(
        self,
        *,
        max_count: int = 10_000,
        max_bytes: int = 16 * 1024 * 1024,
        max_record_bytes: int = 64 * 1024,
    ) -> None:
        self.max_count = max_count
        self.max_bytes = max_bytes
        """Bound of ``bytes``."""
        self.max_record_bytes = max_record_bytes
        """A record whose result and error are larger is not kept."""
        self.bytes = 0
        """What the kept records hold: their results, errors, keys and names, plus
        ``RECORD_OVERHEAD`` each (lengths of the text: bytes, but for non-ASCII characters)."""
        self._records: collections.OrderedDict[str, tuple[WorkflowRecord, int]] = (
            collections.OrderedDict()
        )

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._records

    def get(self, run_id: str) -> WorkflowRecord | None:
        entry = self._records.get(run_id)
        return None if entry is None else entry[0]

    def add(self, record: WorkflowRecord) -> None:
        self._drop(record.run_id)
        size = len(record.result or "") + len(record.error or "")
        if size > self.max_record_bytes:
            return  # read back from the store when asked for
        if record.args:
            record = dataclasses.replace(record, args="")
        size += RECORD_OVERHEAD + len(record.key) + len(record.name)
        self._records[record.run_id] = (record, size)
        self.bytes += size
        while self._records and (
            len(self._records) > self.max_count or self.bytes > self.max_bytes
        ):
            _, (_, dropped) = self._records.popitem(last=False)
            self.bytes -= dropped

    def discard(self, run_id: str) -> None:
        """Forget ``run_id`` (its record was purged from the store)."""
        self._drop(run_id)

    def _drop(self, run_id: str) -> None:
        entry = self._records.pop(run_id, None)
        if entry is not None:
            self.bytes -= entry[1]
