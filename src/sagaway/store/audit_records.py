"""The records of the audit trail a Store keeps: what an operator's action writes
(``AuditNote``), an entry as stored (``AuditRecord``) and a page of them asked for
(``AuditQuery``). Re-exported by ``store.records``."""

from __future__ import annotations

import dataclasses

__all__ = ["AuditNote", "AuditRecord", "AuditQuery"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AuditNote:
    """An operator action for a Store verb to record in the transaction that makes it, only
    when the action changes something (``audit_log``). What it acts on (run, key, schedule)
    comes from the verb itself; the time from the database's clock."""

    entry_id: str
    """Unique, chosen once: a call tried again writes the entry once."""
    action: str
    """``start``, ``signal``, ``cancel``, ``terminate``, ``retry``, ``fork``, ``purge``,
    ``schedule.put``, ``schedule.delete``, ``schedule.pause``, ``schedule.resume``,
    ``schedule.trigger``."""
    actor: str
    """Who: ``local:<user>@<host>`` for a process on its database; through an Engine Server,
    the principal the server authenticated (the server sets it, whatever the client says)."""
    on_behalf_of: str | None = None
    """Who the caller says it acts for, not verified by the store (a console's logged-in user;
    through an Engine Server, the name the client gives itself)."""
    reason: str | None = None
    details: str | None = None
    """A small JSON object (a fork's source and step, a purge's filters and count)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AuditRecord:
    """One entry of the audit trail as stored (``Store.list_audit``)."""

    seq: int
    """Increasing in the order entries were written; never reused."""
    at: float
    actor: str
    on_behalf_of: str | None
    action: str
    run_id: str | None
    """The execution acted on (a start's or fork's new one); None for a purge or a schedule."""
    target: str | None
    """The workflow key, or the schedule id of a schedule action."""
    reason: str | None
    details: str | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AuditQuery:
    """Which entries ``Store.list_audit`` returns: newest first (``seq`` descending), every
    filter given at once."""

    limit: int = 100
    before_seq: int | None = None
    """Keyset cursor: only entries older than the one with this ``seq``."""
    run_id: str | None = None
    target: str | None = None
    actor: str | None = None
    """Matches ``actor`` or ``on_behalf_of``."""
    actions: frozenset[str] = frozenset()
    """Empty: any action."""
    since: float | None = None
    """At or after this time."""
    until: float | None = None
    """Before this time."""
