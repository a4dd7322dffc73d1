"""The workflow list's filters, read from and written back to a query string."""

from __future__ import annotations

import dataclasses
import urllib.parse
from collections.abc import Mapping, Sequence

import sagaway as sw
from sagaway import _human
from sagaway._engine import versions

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


class FilterError(ValueError):
    """A filter the operator typed cannot be read; the message says how to write it."""


def parse_when(value: str, field: str, now: float | None = None) -> float:
    """Epoch seconds of an ISO 8601 date or date-time (UTC unless it has an offset) or of a
    duration ago (``90s``, ``15m``, ``2h``, ``3d``, ``1w``): ``_human.moment``."""
    try:
        return _human.moment(value, utc=True, now=now)
    except ValueError:
        raise FilterError(
            f"{field}: {value!r} is neither an ISO 8601 date/time in UTC (2026-12-01, "
            "2026-12-01T10:30) nor a duration ago (90s, 15m, 2h, 3d, 1w)"
        ) from None


@dataclasses.dataclass(frozen=True, slots=True)
class ListFilters:
    statuses: tuple[sw.WorkflowStatus, ...] = ()
    name: str = ""
    key_prefix: str = ""
    version: str = ""
    """Code versions, comma-separated (``unversioned``: executions without one)."""
    since: str = ""
    until: str = ""
    after: str = ""
    limit: int = PAGE_SIZE
    where: str = ""
    """Search attribute filters, comma-separated (``customer=4711, amount>=100``)."""

    @classmethod
    def from_query(cls, query: Mapping[str, str], statuses: Sequence[str]) -> ListFilters:
        """From the list page's query string (``status`` may repeat); FilterError if bad."""
        known = {s.value for s in sw.WorkflowStatus}
        wanted = [s.strip().upper() for s in statuses if s.strip()]
        unknown = [s for s in wanted if s not in known]
        if unknown:
            raise FilterError(f"unknown status {', '.join(unknown)}")
        try:
            limit = int(query.get("limit") or PAGE_SIZE)
        except ValueError:
            raise FilterError("limit must be a whole number") from None
        return cls(
            statuses=tuple(sw.WorkflowStatus(s) for s in dict.fromkeys(wanted)),
            name=query.get("name", "").strip(),
            key_prefix=query.get("key_prefix", ""),
            version=query.get("version", "").strip(),
            since=query.get("since", "").strip(),
            until=query.get("until", "").strip(),
            after=query.get("after", "").strip(),
            limit=min(max(limit, 1), MAX_PAGE_SIZE),
            where=query.get("where", "").strip(),
        )

    def bounds(self, now: float | None = None) -> tuple[float | None, float | None]:
        since = parse_when(self.since, "created since", now) if self.since else None
        until = parse_when(self.until, "created until", now) if self.until else None
        return since, until

    def query(self, **changes: object) -> str:
        """The query string of these filters with ``changes`` (e.g. ``after=cursor``)."""
        data = dataclasses.replace(self, **changes)  # type: ignore[arg-type]
        pairs: list[tuple[str, str]] = [("status", s.value) for s in data.statuses]
        pairs += [
            (name, str(value))
            for name, value in (
                ("name", data.name),
                ("key_prefix", data.key_prefix),
                ("version", data.version),
                ("since", data.since),
                ("until", data.until),
                ("after", data.after),
                ("where", data.where),
            )
            if value
        ]
        if data.limit != PAGE_SIZE:
            pairs.append(("limit", str(data.limit)))
        return urllib.parse.urlencode(pairs)

    @property
    def active(self) -> bool:
        return bool(
            self.statuses
            or self.name
            or self.key_prefix
            or self.version
            or self.since
            or self.until
            or self.where
        )

    def attribute_filters(self) -> list[str] | None:
        """The ``where`` filters, one text each (None: none); ``list_workflows`` reads them and
        raises ValueError for one it cannot."""
        texts = [part.strip() for part in self.where.split(",") if part.strip()]
        return texts or None

    def code_versions(self) -> frozenset[str | None] | None:
        """The versions of the ``version`` filter (None: any); ValueError if it is not a
        comma-separated list of versions."""
        return versions.parse_versions(self.version) if self.version else None
