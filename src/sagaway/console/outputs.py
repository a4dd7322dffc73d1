"""What a workflow published, as its page shows it: search attributes, each event's latest
value, and the latest items of each stream (the page's live part is fetched again every few
seconds, so a stream being written grows on screen)."""

from __future__ import annotations

import dataclasses
from typing import Any

import sagaway as sw

SHOWN = 1000
"""Outputs read per page view (the newest ``SHOWN_PER_STREAM`` of each stream are shown)."""
SHOWN_PER_STREAM = 50


@dataclasses.dataclass(frozen=True, slots=True)
class Shown:
    attributes: dict[str, Any]
    events: dict[str, sw.OutputItem]
    """Each key's latest value."""
    streams: dict[str, list[sw.OutputItem]]
    """Each stream's newest items, oldest first."""
    counts: dict[str, int]
    """Items per stream (all of them, not only those shown)."""


async def shown(handle: sw.WorkflowHandle[Any]) -> Shown:
    events: dict[str, sw.OutputItem] = {}
    streams: dict[str, list[sw.OutputItem]] = {}
    counts: dict[str, int] = {}
    async for item in handle.outputs(follow=False):
        if item.kind == "event":
            events[item.name] = item
        else:
            items = streams.setdefault(item.name, [])
            items.append(item)
            del items[:-SHOWN_PER_STREAM]
            counts[item.name] = item.offset + 1
        if item.seq >= SHOWN:
            break
    return Shown(await handle.search_attributes(), events, streams, counts)
