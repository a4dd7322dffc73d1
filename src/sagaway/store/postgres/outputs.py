"""Events, streams and search attributes on PostgreSQL (see ``store._outputs``): the
publication's transaction, under the owner's row lock, and the reads."""

from __future__ import annotations

from sagaway import errors
from sagaway.store import _outputs
from sagaway.store.postgres.conn import Conn, Q, Run, exists, named
from sagaway.store.records import OutputRecord, Publication, SearchAttribute


class Outputs:
    """The output verbs of ``PostgresStore`` (a collaborator given the store's ``_run``)."""

    def __init__(self, run: Run) -> None:
        self._run = run

    async def publish(self, publication: Publication, *, token: str, now: float) -> None:
        writes = _outputs.writes(publication, token=token, now=now)

        async def op(conn: Conn, retried: bool) -> None:
            # Checked every time, not only on a retry: a step of this call id is never written
            # by anything but this verb, so finding it means the work is done.
            if await exists(conn, "step_recorded", writes.step):
                return
            # The row lock (not a share lock) makes this transaction the run's only writer of
            # outputs: the next seq and position are read and written under it.
            if not await exists(conn, "lock_owned", writes.owned):
                raise errors.LeaseLost(writes.owned["run_id"])
            for name, params in writes.statements:
                await conn.execute(Q[name], params)

        await self._run(op)

    async def read_outputs(self, run_id: str, *, after: int, limit: int) -> list[OutputRecord]:
        params = _outputs.read_params(run_id, after=after, limit=limit, no_limit=None)
        return await self._rows("read_outputs", params)

    async def read_stream(
        self, run_id: str, *, stream: str, offset: int, limit: int
    ) -> list[OutputRecord]:
        params = _outputs.stream_params(
            run_id, stream=stream, offset=offset, limit=limit, no_limit=None
        )
        return await self._rows("read_stream", params)

    async def get_event(self, run_id: str, *, key: str) -> OutputRecord | None:
        rows = await self._rows("get_event", {"run_id": run_id, "key": key})
        return rows[0] if rows else None

    async def list_search_attributes(self, run_id: str) -> list[SearchAttribute]:
        async def op(conn: Conn, retried: bool) -> list[SearchAttribute]:
            rows = await named(conn, "list_search_attributes", {"run_id": run_id})
            return [_outputs.attribute_from_row(row) for row in rows]

        return await self._run(op, transaction=False)

    async def _rows(self, query: str, params: _outputs.Params) -> list[OutputRecord]:
        async def op(conn: Conn, retried: bool) -> list[OutputRecord]:
            return [_outputs.output_from_row(row) for row in await named(conn, query, params)]

        return await self._run(op, transaction=False)
