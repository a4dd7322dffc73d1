"""The Engine Server's own time: the only clock that decides leases and timers.

Requests carry no time of the client's, only lease lengths and expiries; a client whose clock is
wrong, or a token holder who lies, must not expire another holder's live lease, make timers due
early, or hold a lease for years. So the server takes every "now" from its own store's clock (on
PostgreSQL the database's clock, as an embedded engine does: ``_engine.server_clock``) and clamps
every lease it writes to ``max_lease`` seconds from that now (``apply``: the one place a verb's
times are decided).

``trust_client_clock`` acts at the client's time of each call, sent as the call's metadata
``sagaway-client-now`` (never its lease lengths beyond ``max_lease``): for test suites whose
clients drive time with a fake clock, never in production.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
from collections.abc import Iterable
from typing import Any

from sagaway._engine.server_clock import server_clock
from sagaway.clock import Clock, SystemClock
from sagaway.store.base import Store
from sagaway.store.records import Lease

CLIENT_NOW = "sagaway-client-now"
_client_now: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "sagaway_client_now", default=None
)


def set_client_now(metadata: Iterable[tuple[str, Any]] | None) -> None:
    """The client's time of the call being served, from its metadata (used only by a server
    that trusts its clients' clocks); calls of a Batch each carry their own."""
    found = None
    for key, value in metadata or ():
        if key == CLIENT_NOW:
            found = float(value.decode() if isinstance(value, bytes) else value)
    _client_now.set(found)


DEFAULT_MAX_LEASE = 300.0
"""Seconds: ten times a Manager's default lease_timeout (30 s)."""


class ServerClock:
    """Where the service takes "now" and how long a lease may be."""

    def __init__(
        self, clock: Clock, *, max_lease: float = DEFAULT_MAX_LEASE, trust_client: bool = False
    ) -> None:
        if not (math.isfinite(max_lease) and max_lease > 0):
            raise ValueError(f"max_lease must be a positive number of seconds, not {max_lease}")
        self.clock = clock
        self.max_lease = max_lease
        self.trust_client = trust_client
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def over(
        cls, store: Store, *, max_lease: float = DEFAULT_MAX_LEASE, trust_client: bool = False
    ) -> ServerClock:
        """The clock of ``store`` (its database's, kept in step; else this host's)."""
        clock, task = await server_clock(store, SystemClock())
        made = cls(clock, max_lease=max_lease, trust_client=trust_client)
        made._task = task
        return made

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def now(self) -> float:
        """The time a call acts at: the server's (the client's only when trusted)."""
        if self.trust_client:
            client_now = _client_now.get()
            if client_now:
                return client_now
        return self.clock.now()

    def apply(self, values: dict[str, Any]) -> None:
        """Set a verb's times in its arguments ``values``: ``now`` is this clock's, and a lease
        asked for (``lease``, ``lease_timeout``, ``expires_at``) is clamped to ``max_lease``."""
        now = self.now()
        if "now" in values:
            values["now"] = now
        if values.get("lease") is not None:
            values["lease"] = self.lease(values["lease"], now)
        if "lease_timeout" in values:
            values["lease_timeout"] = self.lease_timeout(values["lease_timeout"])
        if "expires_at" in values:
            requested = values["expires_at"]
            # A renewal (no "now" of its own) follows renewal(): trusting clients keeps theirs.
            has_now = "now" in values
            values["expires_at"] = (
                self.expires_at(requested, now) if has_now else self.renewal(requested)
            )

    def lease_timeout(self, requested: float) -> float:
        """A lease length a client asked for, at most ``max_lease`` (a bad value: ValueError)."""
        if not (math.isfinite(requested) and requested > 0):
            raise ValueError(f"lease_timeout must be a positive number of seconds, not {requested}")
        return min(requested, self.max_lease)

    def expires_at(self, requested: float, now: float) -> float:
        """A lease expiry a client asked for, at most ``max_lease`` after ``now``."""
        if math.isnan(requested):
            raise ValueError("expires_at must be a number")
        return min(requested, now + self.max_lease)

    def renewal(self, requested: float) -> float:
        """A renewal's expiry (the request has no ``now``): at most ``max_lease`` from the
        server's now, unless clients' clocks are trusted."""
        if self.trust_client:
            return requested
        return self.expires_at(requested, self.clock.now())

    def lease(self, lease: Lease, now: float) -> Lease:
        """``lease`` with its expiry clamped."""
        expires_at = self.expires_at(lease.expires_at, now)
        if expires_at == lease.expires_at:
            return lease
        return Lease(token=lease.token, owner=lease.owner, expires_at=expires_at)
