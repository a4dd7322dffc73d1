"""Events, streams and search attributes on SQLite: each verb one job of the writer (the
parameters and rows are shared: ``store._outputs``)."""

from __future__ import annotations

import sqlite3

from sagaway import errors
from sagaway.store import _outputs
from sagaway.store.records import OutputRecord, Publication, SearchAttribute
from sagaway.store.sql import queries
from sagaway.store.sqlite.jobs import Call

_Q = queries("sqlite")


class Outputs:
    """The output verbs of ``SQLiteStore`` (a collaborator given the writer's ``call``)."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def publish(self, publication: Publication, *, token: str, now: float) -> None:
        writes = _outputs.writes(publication, token=token, now=now)

        def op(conn: sqlite3.Connection) -> None:
            if conn.execute(_Q["step_recorded"], writes.step).fetchone() is not None:
                return  # written before: once only
            if conn.execute(_Q["check_owner"], writes.owned).fetchone() is None:
                raise errors.LeaseLost(writes.owned["run_id"])
            for name, params in writes.statements:
                conn.execute(_Q[name], params)

        await self._call(op)

    async def read_outputs(self, run_id: str, *, after: int, limit: int) -> list[OutputRecord]:
        params = _outputs.read_params(run_id, after=after, limit=limit, no_limit=-1)
        return await self._rows("read_outputs", params)

    async def read_stream(
        self, run_id: str, *, stream: str, offset: int, limit: int
    ) -> list[OutputRecord]:
        params = _outputs.stream_params(
            run_id, stream=stream, offset=offset, limit=limit, no_limit=-1
        )
        return await self._rows("read_stream", params)

    async def get_event(self, run_id: str, *, key: str) -> OutputRecord | None:
        rows = await self._rows("get_event", {"run_id": run_id, "key": key})
        return rows[0] if rows else None

    async def list_search_attributes(self, run_id: str) -> list[SearchAttribute]:
        def op(conn: sqlite3.Connection) -> list[SearchAttribute]:
            rows = conn.execute(_Q["list_search_attributes"], {"run_id": run_id}).fetchall()
            return [_outputs.attribute_from_row(row) for row in rows]

        return await self._call(op)

    async def _rows(self, query: str, params: _outputs.Params) -> list[OutputRecord]:
        def op(conn: sqlite3.Connection) -> list[OutputRecord]:
            rows = conn.execute(_Q[query], params).fetchall()
            return [_outputs.output_from_row(row) for row in rows]

        return await self._call(op)
