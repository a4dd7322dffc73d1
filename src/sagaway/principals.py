"""Who is calling: the principal an Engine Server or console authenticated, and its roles.

A principal is named by its token's name (``[[token]] name = ...`` in a tokens file) or by the
subject of its client certificate under mutual TLS. The name is what the audit trail records as
"who"; the roles decide what it may do. A process that talks to its database directly (an
embedded Manager, the CLI on a ``sqlite://`` or ``postgresql://`` URL) is trusted with everything
and records itself as ``local:<user>@<host>``.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import enum
import getpass
import socket
from collections.abc import Iterator


class Role(enum.StrEnum):
    """What a principal may do. ``admin`` includes every other role; ``operate`` and
    ``worker`` include ``read`` (see ``IMPLIED``)."""

    READ = "read"
    """List, show, count, metrics, the console's pages."""
    OPERATE = "operate"
    """Start, signal, cancel, retry, fork (and everything ``read`` may)."""
    WORKER = "worker"
    """Claim and run work: what a Manager running workflows needs."""
    ADMIN = "admin"
    """Terminate, purge, schedules; and every other role."""


ALL_ROLES = frozenset(Role)
IMPLIED: dict[Role, frozenset[Role]] = {
    Role.READ: frozenset({Role.READ}),
    Role.OPERATE: frozenset({Role.OPERATE, Role.READ}),
    # A worker reads the histories it replays and the records of the children it waits for.
    Role.WORKER: frozenset({Role.WORKER, Role.READ}),
    Role.ADMIN: ALL_ROLES,
}
"""The roles each role grants: itself and the ones it includes."""


def granted(roles: frozenset[Role]) -> frozenset[Role]:
    """Every role that holding ``roles`` grants (``IMPLIED`` applied)."""
    return frozenset().union(*(IMPLIED[role] for role in roles))


@dataclasses.dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller: its name (for the audit trail) and its roles."""

    name: str
    roles: frozenset[Role] = ALL_ROLES

    def may(self, role: Role) -> bool:
        """True when this principal holds ``role`` or a role that includes it (``IMPLIED``:
        ``admin`` holds them all, ``operate`` and ``worker`` hold ``read``)."""
        return any(role in IMPLIED[held] for held in self.roles)

    def may_any(self, roles: frozenset[Role]) -> bool:
        """True when this principal may act in one of ``roles`` at least."""
        return any(self.may(role) for role in roles)


_current: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "sagaway_principal", default=None
)


def current_principal() -> Principal | None:
    """The principal of the call being served, or None outside an authenticated call."""
    return _current.get()


def set_current_principal(principal: Principal | None) -> contextvars.Token[Principal | None]:
    """Make ``principal`` the caller of the code that runs next in this context."""
    return _current.set(principal)


@contextlib.contextmanager
def acting_as(principal: Principal | None) -> Iterator[None]:
    """Make ``principal`` the current caller inside the block (``set_current_principal``),
    and the previous one again after it."""
    token = set_current_principal(principal)
    try:
        yield
    finally:
        _current.reset(token)


def local_actor() -> str:
    """The name a process acting on its database directly records: ``local:<user>@<host>``."""
    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment (a container without /etc/passwd)
        user = "unknown"
    return f"local:{user}@{socket.gethostname()}"
