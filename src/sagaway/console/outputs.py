"""What a workflow published, as its page shows it: search attributes, and its outputs (events
and stream items) a page at a time.

Outputs are numbered 1, 2, 3, ... in the order the workflow wrote them (``seq``), so a page is
"the ``PAGE`` outputs after number N" (the query's ``outputs=N``, 0 by default): every output
is reachable through the page's "older" and "newer" links, and a page reads only its own rows.
The page's live part is fetched again every few seconds, so a stream being written grows on
screen until the page is full (then "newer" leads on).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import sagaway as sw

PAGE = 1000
"""Outputs read and shown per page view."""


@dataclasses.dataclass(frozen=True, slots=True)
class Shown:
    attributes: dict[str, Any]
    events: dict[str, sw.OutputItem]
    """Each event's latest value on this page."""
    streams: dict[str, list[sw.OutputItem]]
    """Each stream's items on this page, oldest first."""
    after: int
    """The page holds the outputs numbered after this one."""
    last: int
    """The number of the page's last output (``after`` when it holds none)."""
    more: bool
    """Whether newer outputs follow this page."""

    @property
    def older(self) -> int | None:
        """The ``outputs=`` of the previous page (None: this is the first)."""
        return max(0, self.after - PAGE) if self.after > 0 else None

    @property
    def newer(self) -> int | None:
        """The ``outputs=`` of the next page (None: none yet)."""
        return self.last if self.more else None


def page_start(query: Any) -> int:
    """The ``outputs=`` of a query string (0 when absent or not a whole number >= 0)."""
    raw = query.get("outputs", "")
    return int(raw) if isinstance(raw, str) and raw.isdigit() else 0


async def shown(handle: sw.WorkflowHandle[Any], after: int = 0) -> Shown:
    events: dict[str, sw.OutputItem] = {}
    streams: dict[str, list[sw.OutputItem]] = {}
    last, count, more = after, 0, False
    async for item in handle.outputs(after=after, follow=False):
        if count == PAGE:
            more = True  # one more than a page was there: a newer page
            break
        count += 1
        last = item.seq
        if item.kind == "event":
            events[item.name] = item
        else:
            streams.setdefault(item.name, []).append(item)
    return Shown(await handle.search_attributes(), events, streams, after, last, more)
