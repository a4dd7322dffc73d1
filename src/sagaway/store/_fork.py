"""``fork_workflow``, the store half of a fork (see ``sagaway._engine.forking``): a new PENDING
execution copying an ended one's name, arguments and queue, and the steps it keeps, in one
transaction. Payloads given with the fork (a codec's, re-sealed for the new run) replace the
copies in that same transaction: no reader ever sees a fork holding its source's ciphertexts.
The plan is shared by both dialects; ``sqlite.fork`` and ``postgres.fork`` run it (kept apart so
SQLite users need no psycopg).

What the kept publish steps published goes with them, in the same transaction: the fork replays
those steps without publishing again, so its events, streams and search attributes would lack
what they wrote. The copies are numbered again as the fork would have written them (``seq`` from
1, each stream's and each event key's positions from 0, in the source's order): a reader of the
fork from offset 0 sees the kept items, then the fork's own, with no gap. Its search attributes
are rebuilt from the attribute writes of the kept steps (the latest of each name wins)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sagaway.store._rows import Row
from sagaway.store.records import AuditNote, ForkRequest
from sagaway.store.sql import queries

_Q = queries("sqlite")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Fork(ForkRequest):
    """One fork as a store runs it: the request, at ``now``."""

    now: float
    audit: AuditNote | None = None
    """Written with the new execution (about it), when it is created."""

    @classmethod
    def of(cls, request: ForkRequest, now: float, audit: AuditNote | None) -> Fork:
        fields = {f.name: getattr(request, f.name) for f in dataclasses.fields(ForkRequest)}
        return cls(**fields, now=now, audit=audit)

    def params(self) -> dict[str, Any]:
        """``fork_workflow`` and ``fork_steps`` (``call_ids`` as a list: PostgreSQL's array)."""
        return {
            "source_run_id": self.source_run_id,
            "run_id": self.run_id,
            "key": self.key,
            "key_space": self.key_space,
            "now": self.now,
            "call_ids": list(self.call_ids),
            "code_version": self.code_version,
        }

    def replacements(self) -> list[tuple[str, dict[str, Any]]]:
        """The writes that put ``payloads`` in place of the copies (none without them)."""
        if self.payloads is None:
            return []
        writes: list[tuple[str, dict[str, Any]]] = [
            ("fork_args", {"run_id": self.run_id, "args": self.payloads.args})
        ]
        kept = set(self.call_ids)
        for step in self.payloads.steps:
            if step.call_id not in kept:
                raise ValueError(
                    f"fork payloads name step {step.call_id!r}, which the fork does not keep "
                    f"(it keeps {sorted(kept)})"
                )
            params = {"run_id": self.run_id, "call_id": step.call_id}
            writes.append(
                ("fork_step_payloads", {**params, "result": step.result, "error": step.error})
            )
        return writes

    def copied_outputs(self, rows: Sequence[Row]) -> list[dict[str, Any]]:
        """``fork_output`` for each of ``rows`` (``fork_outputs``: what the kept steps
        published, in the source's order), numbered again and holding ``payloads``' values.

        Raises:
            ValueError: the payloads name a value the fork does not copy.
        """
        values = {} if self.payloads is None else {o.seq: o.value for o in self.payloads.outputs}
        positions: dict[tuple[str, str], int] = {}
        copies: list[dict[str, Any]] = []
        for seq, row in enumerate(rows, start=1):
            kind, name = row["kind"], row["name"]
            position = positions.get((kind, name), -1) + 1
            positions[kind, name] = position
            copies.append(
                {"run_id": self.run_id, "seq": seq, "call_id": row["call_id"], "kind": kind}
                | {"name": name, "position": position, "at": row["at"]}
                | {"value": values.pop(int(row["seq"]), row["value"])}
            )
        if values:
            raise ValueError(
                f"fork payloads name published values {sorted(values)} of run "
                f"{self.source_run_id!r}, which the fork does not copy (only what its kept "
                "publish steps wrote)"
            )
        return copies

    def copied_attributes(self, rows: Sequence[Row]) -> list[dict[str, Any]]:
        """``insert_attribute_write`` and ``upsert_search_attribute`` for each of ``rows``
        (``fork_attribute_writes``, in the source's order: the latest of a name wins)."""
        return [
            {"run_id": self.run_id, "call_id": row["call_id"], "name": row["name"]}
            | {"kind": row["kind"], "text": row["str_value"], "number": row["num_value"]}
            for row in rows
        ]
