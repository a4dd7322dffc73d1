"""The verbs of events, streams and search attributes (schema v19/v24), a part of the Store
contract (``store.contract``): what a workflow publishes, written with the step of the call that
published it, and the reads of it (``all_outputs``: every page of them)."""

from __future__ import annotations

from typing import Protocol

from sagaway.store.records import OutputRecord, Publication, SearchAttribute


class OutputVerbs(Protocol):
    """The verbs of events, streams and search attributes (schema v19/v24)."""

    async def publish(self, publication: Publication, *, token: str, now: float) -> None:
        """Record ``publication.step`` and write its outputs and search attributes, in one
        transaction, fenced by ``token``. Exactly once: a step already recorded under its call
        id (a transaction retried after a lost acknowledgement) writes nothing again. Outputs
        take the execution's next ``seq`` and a stream item its stream's next offset."""
        ...

    async def read_outputs(self, run_id: str, *, after: int, limit: int) -> list[OutputRecord]:
        """What ``run_id`` published (events and the items of every stream) with a ``seq``
        greater than ``after``, in order, at most ``limit``."""
        ...

    async def read_stream(
        self, run_id: str, *, stream: str, offset: int, limit: int
    ) -> list[OutputRecord]:
        """The items of ``stream`` from ``offset`` on, in order, at most ``limit``."""
        ...

    async def get_event(self, run_id: str, *, key: str) -> OutputRecord | None:
        """The latest value of the event ``key`` (None: never set)."""
        ...

    async def list_search_attributes(self, run_id: str) -> list[SearchAttribute]:
        """The search attributes of ``run_id``, by name."""
        ...


_PAGE = 500
"""Outputs read at a time by ``all_outputs`` (one reply of the Engine Server each)."""


async def all_outputs(store: OutputVerbs, run_id: str) -> list[OutputRecord]:
    """Everything ``run_id`` published, in order, read a page at a time (a fork copies what its
    kept steps published: ``forking``, the codec's re-sealing)."""
    found: list[OutputRecord] = []
    while page := await store.read_outputs(
        run_id, after=found[-1].seq if found else 0, limit=_PAGE
    ):
        found.extend(page)
        if len(page) < _PAGE:
            break
    return found
