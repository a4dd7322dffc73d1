"""Console sessions and the back-off of failed logins.

Sessions: a login gets a fresh random session id (256 bits) for its cookie; the console keeps
only its SHA-256, with who logged in (the digest of the token used, looked up again at each
request so that a token removed from the tokens file ends its sessions) and when it was made
and last used, in this process's memory. A session
ends when it has been idle for ``idle`` seconds (12 h by default), ``lifetime`` seconds after
the login whatever its use (7 days), at logout, and when the console restarts (sessions are not
shared between ``sagaway ui`` processes: behind a load balancer, pin each browser to one).

Failed logins (a wrong token on the login form, or a wrong ``Authorization: Bearer`` header)
back off twice:

- **per client address**: after ``ADDRESS.free`` failures in a row, the address must wait
  1 s, 2 s, 4 s ... (at most ``ADDRESS.cap``, 5 min) after each failure before its next
  attempt is even checked; attempts in the wait get 429 with ``Retry-After``, are not checked
  and not counted. A success clears the address.
- **globally**: after ``GLOBAL.free`` failures from all addresses together, every later
  attempt is checked only after a delay doubling with each failure up to ``GLOBAL.cap``
  (10 s). It is a delay, never a refusal: many addresses failing together slow down guessing
  without locking anyone out, and the real user's right token gets in after at most the cap.

Failures are forgotten after ``forget`` seconds without one (1 h). The address is the one the
connection comes from: behind a reverse proxy every client shares the proxy's address (the
console does not trust ``X-Forwarded-For``), so the per-address back-off then acts globally.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]

DEFAULT_IDLE = 12 * 3600.0
DEFAULT_LIFETIME = 7 * 86400.0
MAX_SESSIONS = 10_000
"""Live sessions kept at most; beyond it the least recently used one ends."""


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


@dataclasses.dataclass(slots=True)
class _Session:
    who: str
    created: float
    used: float


class Sessions:
    """The live sessions of one console process."""

    def __init__(
        self,
        *,
        idle: float = DEFAULT_IDLE,
        lifetime: float = DEFAULT_LIFETIME,
        clock: Clock = time.monotonic,
    ) -> None:
        if idle <= 0 or lifetime <= 0:
            raise ValueError("session idle time and lifetime must be positive (seconds)")
        self.idle = idle
        self.lifetime = lifetime
        self.clock = clock
        self._live: OrderedDict[str, _Session] = OrderedDict()

    def open(self, who: str) -> str:
        """A new session of ``who``: its id, for the cookie (the console keeps only its
        digest)."""
        session_id = secrets.token_urlsafe(32)
        now = self.clock()
        self._live[_digest(session_id)] = _Session(who=who, created=now, used=now)
        while len(self._live) > MAX_SESSIONS:
            self._live.popitem(last=False)
        return session_id

    def check(self, session_id: str) -> str | None:
        """Who ``session_id``'s live session belongs to (and mark it used); None when it is no
        live session (an expired one ends)."""
        if not session_id:
            return None
        digest = _digest(session_id)
        session = self._live.get(digest)
        if session is None:
            return None
        now = self.clock()
        if now - session.used > self.idle or now - session.created > self.lifetime:
            del self._live[digest]
            return None
        session.used = now
        self._live.move_to_end(digest)
        return session.who

    def close(self, session_id: str) -> None:
        """End ``session_id`` (logout): its cookie no longer works, wherever it was copied."""
        self._live.pop(_digest(session_id), None)

    def __len__(self) -> int:
        return len(self._live)


@dataclasses.dataclass(frozen=True, slots=True)
class Backoff:
    """Failures allowed before backing off, the first wait, and its cap (seconds)."""

    free: int
    base: float
    cap: float

    def wait(self, failures: int) -> float:
        """The wait after ``failures`` failures: 0, then ``base`` doubling up to ``cap``."""
        if failures < self.free:
            return 0.0
        return min(self.base * 2.0 ** min(failures - self.free, 64), self.cap)


ADDRESS = Backoff(free=5, base=1.0, cap=300.0)
GLOBAL = Backoff(free=50, base=0.1, cap=10.0)


@dataclasses.dataclass(slots=True)
class _Failures:
    count: int
    last: float


@dataclasses.dataclass(kw_only=True, eq=False)
class LoginThrottle:
    """How long a login attempt must wait, per client address and for all of them."""

    per_address: Backoff = ADDRESS
    overall: Backoff = GLOBAL
    forget: float = 3600.0
    clock: Clock = time.monotonic
    sleep: Sleep = asyncio.sleep
    max_addresses: int = 100_000
    _addresses: OrderedDict[str, _Failures] = dataclasses.field(
        default_factory=OrderedDict, init=False, repr=False
    )
    _all: _Failures = dataclasses.field(default_factory=lambda: _Failures(0, 0.0), init=False)

    def _recent(self, failures: _Failures | None, now: float) -> int:
        if failures is None or now - failures.last > self.forget:
            return 0
        return failures.count

    def retry_after(self, address: str) -> float:
        """Seconds ``address`` must still wait before an attempt is checked (0: go ahead)."""
        now = self.clock()
        failures = self._addresses.get(address)
        count = self._recent(failures, now)
        if failures is None or count == 0:
            return 0.0
        return max(0.0, failures.last + self.per_address.wait(count) - now)

    async def pause(self) -> None:
        """The global delay before an attempt is checked while many attempts fail."""
        delay = self.overall.wait(self._recent(self._all, self.clock()))
        if delay > 0:
            await self.sleep(delay)

    def failed(self, address: str) -> None:
        now = self.clock()
        failures = self._addresses.pop(address, None)
        count = self._recent(failures, now) + 1
        self._addresses[address] = _Failures(count, now)
        while len(self._addresses) > self.max_addresses:
            self._addresses.popitem(last=False)
        self._all = _Failures(self._recent(self._all, now) + 1, now)

    def succeeded(self, address: str) -> None:
        self._addresses.pop(address, None)
