"""``fork_workflow``, the store half of a fork (see ``sagaway._engine.forking``): a new PENDING
execution copying an ended one's name, arguments and queue, and the steps it keeps, in one
transaction. Payloads given with the fork (a codec's, re-sealed for the new run) replace the
copies in that same transaction: no reader ever sees a fork holding its source's ciphertexts.
The plan is shared by both dialects; ``sqlite.fork`` and ``postgres.fork`` run it (kept apart so
SQLite users need no psycopg)."""

from __future__ import annotations

import dataclasses
from typing import Any

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
