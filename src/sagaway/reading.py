"""Operators' reads without the engine: what ``sagaway list`` and ``sagaway show`` read.

A Manager opens its engine to read (``Manager.connect``): that imports the execution machinery
(executor, workers, the options' pydantic models) and, on PostgreSQL, reads the server's clock:
about a hundred milliseconds of CPU more for a command that only reads a page. ``open_reader``
opens the store by URL instead (with the codecs that open sealed payloads, if any) and reads
through the functions the Manager reads through (``listing.list_workflows``,
``descriptions.read``), so the two give the same answers. tests/integration/test_cli_read_path.py
checks that these commands import none of the engine, so that they stay quick to start.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Unpack

from sagaway import descriptions, errors, listing, search
from sagaway._engine import outages
from sagaway.clock import Clock, SystemClock
from sagaway.descriptions import WorkflowDescription
from sagaway.store import open_store, resolve_url
from sagaway.store.base import Store

if TYPE_CHECKING:
    from sagaway.codecs import Chain


@dataclasses.dataclass(frozen=True, slots=True)
class _Options:
    unavailable_timeout: float
    """Seconds a read rides an outage out before ``EngineUnavailable`` (as a Manager's)."""


class Reader:
    """Reads of a store opened by ``open_reader``: the Manager's read calls, engine-free."""

    def __init__(self, store: Store, *, unavailable_timeout: float) -> None:
        self.store = store
        self.clock: Clock = SystemClock()
        self.options = _Options(unavailable_timeout)

    async def list_workflows(
        self, **filters: Unpack[listing.ListFilter]
    ) -> list[WorkflowDescription]:
        """As ``Manager.list_workflows``."""
        return await listing.list_workflows(self.store, **filters)

    async def describe(self, key: str) -> WorkflowDescription:
        """As ``manager.get_workflow(key).describe()`` (tried again through an outage)."""

        async def read() -> WorkflowDescription:
            record = await self.store.get_workflow(key)
            if record is None:
                raise errors.WorkflowNotFound(key)
            return await descriptions.read(self.store, record, now=self.clock.now())

        return await outages.ride(self, f"describe workflow {key!r}", read)

    async def search_attributes(self, key: str) -> dict[str, search.AttributeValue]:
        """As ``manager.get_workflow(key).search_attributes()``."""

        async def read() -> dict[str, search.AttributeValue]:
            record = await self.store.get_workflow(key)
            if record is None:
                raise errors.WorkflowNotFound(key)
            found = await self.store.list_search_attributes(record.run_id)
            return {a.name: search.from_attribute(a) for a in found}

        return await outages.ride(self, f"read the search attributes of {key!r}", read)


@contextlib.asynccontextmanager
async def open_reader(
    url: str | None,
    *,
    codec: Chain | None = None,
    token: str | None = None,
    unavailable_timeout: float = 30.0,
) -> AsyncIterator[Reader]:
    """The store at ``url`` (else ``$SAGAWAY_DATABASE_URL``, else the default) opened to read,
    as ``Manager(url, codec=codec, token=token).connect(create=False)`` opens it: it creates
    nothing, and raises ``DatabaseNotFound`` when there is no Sagaway database there."""
    store = open_store(resolve_url(url), create=False, token=token)
    if codec is not None:
        from sagaway.codecs import CodecStore  # only to open sealed payloads

        store = CodecStore(store, codec)
    await store.open()
    try:
        yield Reader(store, unavailable_timeout=unavailable_timeout)
    finally:
        await store.close()
