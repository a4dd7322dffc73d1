"""The idempotency-key table of a service's own database.

An activity runs at least once: a timeout does not say whether the service applied the request,
so the engine calls again with the same ``sagaway.activity_info().idempotency_key``. The service
makes the effect happen once by remembering each key it served, **in the same local transaction
as the effect**, with the response it gave::

    keys = IdempotencyKeys(ttl=7 * 86400)
    keys.install(conn)                       # once, at start-up

    def charge(conn, key: str, account: str, amount: int) -> Charge:
        def apply() -> Charge:
            conn.execute("UPDATE accounts SET balance = balance - ? WHERE id = ?",
                         (amount, account))
            return Charge(account=account, amount=amount)

        return keys.run(conn, key, apply, request={"account": account, "amount": amount})

* The first call under a key inserts the key, runs ``operation`` and stores its response; all of
  it commits or rolls back with the caller's transaction (or with a transaction of its own when
  none is open).
* A repeat returns the stored response without running anything. The first call and every
  repeat return the same decoded value.
* A *concurrent* repeat waits for the first call's transaction: PostgreSQL blocks the second
  insert of a key until the first commits (then the repeat reads the response) or rolls back
  (then the repeat runs the operation itself); SQLite serialises writers (``BEGIN IMMEDIATE``).
  On PostgreSQL this relies on READ COMMITTED, the default; under REPEATABLE READ the repeat gets
  a serialization failure, and retrying its transaction returns the stored response.
* A repeat with a different ``request`` is a bug in the caller (one key, two requests):
  :class:`KeyReused` is raised instead of returning another request's response.
* Keys expire after ``ttl`` seconds; an expired key is served as new, and :meth:`purge` deletes
  expired rows. Choose a TTL longer than any retry or recovery of the calling workflow.

If ``operation`` raises, its effects and the key are rolled back to a savepoint, so a caller that
catches the error and commits does not leave a key without a response behind.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any, LiteralString, TypeVar

import pydantic
import pydantic_core

from sagaway import errors, serialization
from sagaway.clock import Clock, SystemClock
from sagaway.toolkit import _tables, localdb

T = TypeVar("T")

_SCHEMA: dict[localdb.Dialect, tuple[LiteralString, ...]] = {
    localdb.Dialect.SQLITE: (
        "CREATE TABLE IF NOT EXISTS sagaway_idempotency_keys ("
        " key TEXT PRIMARY KEY,"
        " fingerprint TEXT,"
        " response TEXT,"
        " created_at REAL NOT NULL,"
        " expires_at REAL NOT NULL)",
        "CREATE INDEX IF NOT EXISTS sagaway_idempotency_keys_expires"
        " ON sagaway_idempotency_keys (expires_at)",
    ),
    localdb.Dialect.POSTGRES: (
        "CREATE TABLE IF NOT EXISTS sagaway_idempotency_keys ("
        " key TEXT PRIMARY KEY,"
        " fingerprint TEXT,"
        " response TEXT,"
        " created_at DOUBLE PRECISION NOT NULL,"
        " expires_at DOUBLE PRECISION NOT NULL)",
        "CREATE INDEX IF NOT EXISTS sagaway_idempotency_keys_expires"
        " ON sagaway_idempotency_keys (expires_at)",
    ),
}

# Claim a key: insert it, or take over an expired row. Returns a row only when this call owns
# the key. On PostgreSQL a concurrent claim of the same key waits here for the first
# transaction to end.
_CLAIM = _tables.both(
    "INSERT INTO sagaway_idempotency_keys (key, fingerprint, response, created_at, expires_at)"
    " VALUES (?, ?, NULL, ?, ?)"
    " ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, response = NULL,"
    " created_at = excluded.created_at, expires_at = excluded.expires_at"
    " WHERE sagaway_idempotency_keys.expires_at <= ?"
    " RETURNING key"
)
_READ = _tables.both("SELECT fingerprint, response FROM sagaway_idempotency_keys WHERE key = ?")
_STORE = _tables.both("UPDATE sagaway_idempotency_keys SET response = ? WHERE key = ?")
_PURGE: dict[localdb.Dialect, LiteralString] = {
    localdb.Dialect.SQLITE: (
        "DELETE FROM sagaway_idempotency_keys WHERE key IN"
        " (SELECT key FROM sagaway_idempotency_keys WHERE expires_at <= ? LIMIT ?)"
    ),
    localdb.Dialect.POSTGRES: (
        "DELETE FROM sagaway_idempotency_keys WHERE key IN"
        " (SELECT key FROM sagaway_idempotency_keys WHERE expires_at <= %s LIMIT %s"
        "  FOR UPDATE SKIP LOCKED)"
    ),
}


class KeyReused(errors.IdempotencyConflict):
    """An idempotency key was used again with a different request."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"idempotency key {key!r} was already used for a different request; a key names "
            "one request (derive it from the request, e.g. sagaway.activity_info()."
            "idempotency_key), or the caller would get another request's response"
        )
        self.key = key


class KeyInProgress(errors.SagawayError):
    """The key is held by the current transaction, whose operation has not finished."""


def fingerprint(request: Any) -> str:
    """A digest of a request's JSON form (dict key order does not matter)."""
    return serialization.args_hash(serialization.encode_value(request, "idempotency request"))


def _response_adapter(
    operation: Callable[..., Any], response_type: Any
) -> pydantic.TypeAdapter[Any]:
    if response_type is None:
        try:
            hints = typing.get_type_hints(operation)
        except Exception:  # lambdas, partials, callables without resolvable annotations
            hints = {}
        response_type = hints.get("return", Any)
        if response_type is inspect.Signature.empty:
            response_type = Any
    return pydantic.TypeAdapter(response_type)


class IdempotencyKeys:
    """Run an operation once per key, inside the caller's transaction.

    Args:
        ttl: seconds a key is remembered; repeats after that run the operation again.
        clock: time source for creation and expiry (``sagaway.testing.FakeClock`` in tests).
    """

    def __init__(self, *, ttl: float = 7 * 86400.0, clock: Clock | None = None) -> None:
        if not ttl > 0:
            raise ValueError(f"ttl must be > 0 seconds, got {ttl!r}")
        self.ttl = ttl
        self.clock: Clock = clock or SystemClock()

    def install(self, conn: localdb.Connection) -> None:
        """Create the table if it does not exist (idempotent; commits)."""
        _tables.install(conn, _SCHEMA)

    def run(
        self,
        conn: localdb.Connection,
        key: str,
        operation: Callable[[], T],
        *,
        request: Any = None,
        response_type: Any = None,
    ) -> T:
        """Run ``operation()`` once for ``key``; return its (stored) response.

        Args:
            conn: the service's connection; the key, the operation's writes and the response
                commit together (in the caller's open transaction, or a new one).
            key: the idempotency key, e.g. ``sagaway.activity_info().idempotency_key``.
            operation: does the work on ``conn``; returns a JSON-serialisable response.
            request: what the key was sent with; a repeat with a different request raises
                :class:`KeyReused`. None: not checked.
            response_type: type the stored response is decoded to (default: ``operation``'s
                return annotation). First calls and repeats return the same decoded value.

        Raises:
            KeyReused: the key was used with another request.
            KeyInProgress: the same transaction is still running the operation for this key
                (a re-entrant call).
        """
        if not isinstance(key, str) or not key:
            raise ValueError("an idempotency key must be a non-empty string")
        dialect = localdb.dialect_of(conn)
        adapter = _response_adapter(operation, response_type)
        digest = None if request is None else fingerprint(request)
        now = self.clock.now()
        with localdb.transaction(conn):
            claimed = conn.execute(
                _CLAIM[dialect], (key, digest, now, now + self.ttl, now)
            ).fetchone()
            if claimed is None:
                stored = _served_before(conn, dialect, key, digest)
                return typing.cast(T, adapter.validate_json(stored))
            value = operation()
            try:
                text = adapter.dump_json(value).decode()
            except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as exc:
                raise errors.PayloadError(
                    f"the response of the operation under idempotency key {key!r} cannot be "
                    f"stored as JSON ({type(value).__name__}): {exc}"
                ) from None
            conn.execute(_STORE[dialect], (text, key))
        return typing.cast(T, adapter.validate_json(text))

    def purge(self, conn: localdb.Connection, *, limit: int = 10_000) -> int:
        """Delete up to ``limit`` expired keys; returns how many (commits, or joins the caller).

        Run it periodically; rows past their TTL are already ignored by :meth:`run`.
        """
        dialect = localdb.dialect_of(conn)
        with localdb.transaction(conn):
            cursor = conn.execute(_PURGE[dialect], (self.clock.now(), limit))
            return max(cursor.rowcount, 0)


def _served_before(
    conn: localdb.Connection, dialect: localdb.Dialect, key: str, digest: str | None
) -> Any:
    """The stored response of ``key``, whose row exists (the claim found it): refused when the
    request differs or the response is not stored yet."""
    row = conn.execute(_READ[dialect], (key,)).fetchone()
    if row is None:
        # Only possible on PostgreSQL above READ COMMITTED: the row committed by a concurrent
        # first call is outside this transaction's snapshot.
        raise KeyInProgress(
            f"idempotency key {key!r} was committed by a concurrent transaction that this "
            "transaction cannot see (isolation above READ COMMITTED); retry the transaction"
        )
    stored_digest, stored = row
    if digest is not None and stored_digest is not None and digest != stored_digest:
        raise KeyReused(key)
    if stored is None:
        raise KeyInProgress(
            f"idempotency key {key!r} is being served by this very transaction "
            "(re-entrant call of IdempotencyKeys.run with the same key)"
        )
    return stored
