"""Events, streams and search attributes in the SQL stores: the parameters and rows both
dialects share (their transactions: ``sqlite.outputs``, ``postgres.outputs``).

A publication is written with the step of the durable call that made it, in one transaction,
and only if that step is not recorded yet: a transaction run again after a lost acknowledgement
finds its step and writes nothing twice; a replay of the workflow finds the step and never calls
the store. So every event, stream item and attribute is written exactly once.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sagaway.store import _params
from sagaway.store._rows import Row
from sagaway.store.records import OutputRecord, Publication, SearchAttribute

Params = dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class Writes:
    """What one ``publish`` writes: its step (``step``; none of it if that is recorded
    already), fenced by the owner's lease (``owned``), then ``statements`` in order."""

    step: Params
    owned: Params
    statements: tuple[tuple[str, Params], ...]
    """(named statement, its parameters): the step, each output, each attribute (its
    ``upsert_search_attribute`` and ``insert_attribute_write``: the step's call id, as a fork
    rebuilds its attributes from the writes of the steps it keeps)."""


def writes(publication: Publication, *, token: str, now: float) -> Writes:
    """The writes of ``publication`` by the owner of lease ``token``, at ``now``."""
    step = _params.step(publication.step)
    run_id, call_id = publication.step.run_id, publication.step.call_id
    statements: list[tuple[str, Params]] = [("upsert_step", step)]
    for o in publication.outputs:
        ids = {"run_id": run_id, "call_id": call_id, "kind": o.kind, "name": o.name}
        statements.append(("insert_output", ids | {"value": o.value, "now": now}))
    for a in publication.attributes:
        ids = {"run_id": run_id, "call_id": call_id, "name": a.name, "kind": a.kind}
        params = ids | {"text": a.text, "number": a.number}
        statements += [("upsert_search_attribute", params), ("insert_attribute_write", params)]
    return Writes(step, {"run_id": run_id, "token": token}, tuple(statements))


def output_from_row(row: Row) -> OutputRecord:
    return OutputRecord(
        seq=int(row["seq"]),
        kind=row["kind"],
        name=row["name"],
        offset=int(row["position"]),
        value=row["value"],
        at=float(row["at"]),
        call_id=row["call_id"],
    )


def attribute_from_row(row: Row) -> SearchAttribute:
    number = row["num_value"]
    return SearchAttribute(
        name=row["name"],
        kind=row["kind"],
        text=row["str_value"],
        number=None if number is None else float(number),
    )


def read_params(run_id: str, *, after: int, limit: int, no_limit: int | None) -> Params:
    return {"run_id": run_id, "after": after, "limit": limit if limit >= 0 else no_limit}


def stream_params(
    run_id: str, *, stream: str, offset: int, limit: int, no_limit: int | None
) -> Params:
    return {
        "run_id": run_id,
        "stream": stream,
        "offset": offset,
        "limit": limit if limit >= 0 else no_limit,
    }
