"""The audit trail on the Engine Server: the server, not the client, says who acted.

A client's call carries an ``AuditNote`` (its action, reason and details, and the name it gives
itself). The server records as ``actor`` the caller it authenticated (``caller``: the one place
that decides it), keeps the client's name only as the claim ``on_behalf_of``, refuses an action
the call does not make, and checks the reason and details as it checks every request. When the
entry is written comes from the database's clock (the column's default), what it is about from
the call's own run or schedule.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from sagaway import identifiers
from sagaway._engine import audit
from sagaway.principals import current_principal
from sagaway.server.auth import ANONYMOUS
from sagaway.store.records import AuditNote
from sagaway.v1 import engine_pb2 as pb

DEFAULT_PRINCIPAL = "default"
"""Who a caller of a server with one token is (the token has no name of its own)."""
MAX_ENTRY_ID = 64


class Peer(Protocol):
    """What a call's gRPC context tells of the client (``ServicerContext``)."""

    def peer(self) -> str: ...


_call: contextvars.ContextVar[Peer | None] = contextvars.ContextVar("sagaway_call", default=None)


def set_call(context: Peer | None) -> None:
    """The call being served (its context, asked for the client's address only when an entry
    is written: most calls write none); calls of a Batch see the Batch's."""
    _call.set(context)


def caller(*, token: bool) -> str:
    """Who is calling, as this server knows it: the authenticated principal's name; without
    one, the server's ``default`` principal when it checks a token, else ``anonymous@<host>``
    (the client's address, without its port)."""
    principal = current_principal()
    if principal is not None and principal.name != ANONYMOUS:
        return principal.name
    if token:
        return DEFAULT_PRINCIPAL
    context = _call.get()
    return f"anonymous@{_host(None if context is None else context.peer())}"


def _host(peer: str | None) -> str:
    """``ipv4:127.0.0.1:5000`` -> ``127.0.0.1``; ``ipv6:[::1]:5000`` -> ``::1``."""
    if not peer:
        return "unknown"
    kind, _, address = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return kind
    host = address.rpartition(":")[0] or address
    return host.strip("[]")


ACTIONS: Mapping[str, tuple[str, ...] | Callable[[Any], tuple[str, ...]]] = {
    "CreateWorkflow": ("start", "schedule.trigger"),
    "ForkWorkflow": ("fork",),
    "EndWorkflow": lambda r: ("terminate",) if r.status == "TERMINATED" else ("cancel",),
    "RequestCancel": ("cancel",),
    "RetryNow": ("retry",),
    "SendSignal": ("signal",),
    "PutSchedule": ("schedule.put",),
    "SetSchedulePaused": lambda r: ("schedule.pause",) if r.paused else ("schedule.resume",),
    "DeleteSchedule": ("schedule.delete",),
    "RecordAudit": ("purge",),
    "PauseWorkflow": lambda r: ("pause",) if r.paused else ("resume",),
    "PauseCalls": lambda r: ("pause",) if r.paused else ("resume",),
}
"""The actions each call may record (some as its request says); a call not here records none."""


def note_of(rpc: str, request: Any, *, token: bool, required: bool = False) -> AuditNote | None:
    """The entry call ``rpc`` writes with its change, signed by this server (``note``);
    ``required``: a call that is nothing but its entry refuses a request without one."""
    allowed = ACTIONS[rpc]
    actions = allowed(request) if callable(allowed) else allowed
    found = note(request, *actions, token=token)
    if found is None and required:
        raise ValueError(f"{rpc} needs its audit note")
    return found


def note(request: object, *actions: str, token: bool, field: str = "audit") -> AuditNote | None:
    """The entry to write with ``request``'s change (None: the client sent none). ``actions``
    are what the call may record (``ValueError``, so INVALID_ARGUMENT, for another)."""
    if not request.HasField(field):  # type: ignore[attr-defined]
        return None
    sent: pb.AuditNote = getattr(request, field)
    if sent.action not in actions:
        wanted = " or ".join(repr(a) for a in actions)
        raise ValueError(f"audit action must be {wanted} for this call, not {sent.action!r}")
    entry_id = sent.entry_id
    if not entry_id or len(entry_id) > MAX_ENTRY_ID:
        raise ValueError(f"audit entry_id must be 1 to {MAX_ENTRY_ID} characters")
    identifiers.check_plain(entry_id, "audit entry_id")
    claimed = sent.on_behalf_of if sent.HasField("on_behalf_of") else None
    if claimed is not None:
        identifiers.check_name(claimed, "audit on_behalf_of")
    return AuditNote(
        entry_id=entry_id,
        action=sent.action,
        actor=caller(token=token),
        on_behalf_of=claimed,
        reason=audit.check_reason(sent.reason) if sent.HasField("reason") else None,
        details=_details(sent.details) if sent.HasField("details") else None,
    )


def _details(text: str) -> str:
    """A client's details: a JSON object of at most ``MAX_DETAILS`` bytes."""
    if len(text.encode("utf-8", "surrogatepass")) > audit.MAX_DETAILS:
        raise ValueError(f"audit details must be at most {audit.MAX_DETAILS} bytes of JSON")
    try:
        value = json.loads(text)
    except ValueError:
        raise ValueError("audit details must be a JSON object") from None
    if not isinstance(value, dict):
        raise ValueError("audit details must be a JSON object")
    identifiers.check_text(text, "audit details")
    return text
