"""The audit trail of operator actions: who did what, when and why.

Audited, from anywhere: cancel, terminate, retry, fork, purge, and the schedule verbs (put,
pause, resume, trigger, delete). Starts and signals are an application's everyday calls and
are audited only when the caller asks: a Manager made with ``audit="all"`` (the command line
and the console), or a call given a ``reason``. A child started by a workflow, a cancel a
parent passes on to its child, a schedule's tick are the engine's own doing: not audited.

An entry is written by the store verb that makes the change, in its transaction, and only if
the change happens (``store.base``): the trail never says a workflow was cancelled when it was
not, and a cancel that committed always has its entry. The purge is the one action made of
many transactions: its entry is written after its last batch (and when it stops on an error);
a process killed in the middle of a purge leaves the batches it deleted without an entry.

Who: a process on its database records ``local:<user>@<host>`` (``principals.local_actor``),
and as ``on_behalf_of`` the principal its code acts for, if any (the console's logged-in user:
``principals.set_current_principal``). Through an Engine Server, the server records the
principal it authenticated, and the client's name for itself only as ``on_behalf_of``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

from sagaway import identifiers
from sagaway.principals import current_principal, local_actor
from sagaway.randomness import new_id
from sagaway.store.records import AuditNote, AuditRecord

ACTIONS = frozenset(
    {
        "start",
        "signal",
        "cancel",
        "terminate",
        "retry",
        "fork",
        "purge",
        "schedule.put",
        "schedule.delete",
        "schedule.pause",
        "schedule.resume",
        "schedule.trigger",
        "pause",
        "resume",
    }
)
"""Every action the trail records."""
AUDIT_MODES = ("operator", "all")
"""``Manager(audit=...)``: the operator verbs only, or also every start and signal."""
MAX_REASON = 1000
"""Characters of a reason."""
MAX_DETAILS = 4096
"""Bytes of an entry's details (JSON)."""


def check_reason(reason: str | None) -> str | None:
    """``reason`` as the trail keeps it: on one line, control characters written as escapes
    (``\\n``, ``\\x1b``: it is printed on operators' terminals); ``ValueError`` past
    ``MAX_REASON`` characters or for text no database can store."""
    if reason is None:
        return None
    if not isinstance(reason, str):
        raise TypeError(f"reason must be a string, not {type(reason).__name__}")
    text = identifiers.escape_controls(reason)
    identifiers.check_text(text, "reason")
    if len(text) > MAX_REASON:
        raise ValueError(
            f"reason must be at most {MAX_REASON} characters (it has {len(text)}): the audit "
            "trail keeps it; say why in a sentence"
        )
    return text


def check_mode(mode: str) -> str:
    if mode not in AUDIT_MODES:
        raise ValueError(
            f"audit must be 'operator' (the operator verbs) or 'all' (also every start and "
            f"signal), not {mode!r}"
        )
    return mode


@functools.cache
def _local() -> str:
    return local_actor()


def note(action: str, reason: str | None = None, **details: Any) -> AuditNote:
    """An entry of ``action`` made by this process (see the module docstring for who);
    ``details``: what else to keep (small JSON values; None ones are left out)."""
    assert action in ACTIONS, action
    principal = current_principal()
    kept = {k: v for k, v in details.items() if v is not None}
    text = json.dumps(kept, sort_keys=True, separators=(",", ":")) if kept else None
    if text is not None and len(text.encode()) > MAX_DETAILS:
        raise ValueError(f"audit details must be at most {MAX_DETAILS} bytes of JSON")
    return AuditNote(
        entry_id=new_id(),
        action=action,
        actor=_local(),
        on_behalf_of=None if principal is None else principal.name,
        reason=check_reason(reason),
        details=text,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class AuditEntry:
    """One operator action of the audit trail (``describe().audit``, ``manager.audit_log()``)."""

    seq: int
    """Increasing in the order entries were written."""
    at: float
    """When (epoch seconds, the database's clock; the Engine Server's database through one)."""
    actor: str
    """Who: ``local:<user>@<host>`` for a process on its database, else the principal the
    Engine Server authenticated (a token's name, ``default``, or ``anonymous@<address>``)."""
    action: str
    """``start``, ``signal``, ``cancel``, ``terminate``, ``retry``, ``fork``, ``purge``,
    ``schedule.put``, ``schedule.delete``, ``schedule.pause``, ``schedule.resume``,
    ``schedule.trigger``."""
    target: str | None
    """The workflow key, or the schedule id of a schedule action; None for a purge."""
    run_id: str | None
    """The execution acted on (a start's or a fork's new one)."""
    reason: str | None
    on_behalf_of: str | None = None
    """Who the caller said it acted for, not verified (a console's logged-in user; through an
    Engine Server, the client's name for itself)."""
    details: dict[str, Any] = dataclasses.field(default_factory=dict)
    """A fork's source and step, a purge's filters and count, a signal's name, ..."""

    @property
    def who(self) -> str:
        """``actor``, with ``on_behalf_of`` when it says more: ``alice (via ops-token)``."""
        if self.on_behalf_of is None or self.on_behalf_of == self.actor:
            return self.actor
        return f"{self.on_behalf_of} (via {self.actor})"


def entry(record: AuditRecord) -> AuditEntry:
    """The public form of a stored entry (details unreadable as JSON are kept as text)."""
    details: dict[str, Any] = {}
    if record.details:
        try:
            loaded = json.loads(record.details)
        except ValueError:
            loaded = None
        details = loaded if isinstance(loaded, dict) else {"unreadable": record.details}
    return AuditEntry(
        seq=record.seq,
        at=record.at,
        actor=record.actor,
        action=record.action,
        target=record.target,
        run_id=record.run_id,
        reason=record.reason,
        on_behalf_of=record.on_behalf_of,
        details=details,
    )
