"""Storage backends behind one ``Store`` contract, chosen by URL."""

from __future__ import annotations

import os

from sagaway.store.contract import (
    CreateResult,
    DatabaseNotFound,
    PermissionDenied,
    Store,
    StoreUnavailable,
)

DEFAULT_URL = "sqlite:///sagaway.db"
"""The embedded default: a SQLite file in the working directory."""

__all__ = [
    "DEFAULT_URL",
    "CreateResult",
    "DatabaseNotFound",
    "PermissionDenied",
    "Store",
    "StoreUnavailable",
    "open_store",
    "resolve_url",
]


def resolve_url(url: str | None) -> str:
    """The URL given, else ``SAGAWAY_DATABASE_URL``, else the embedded default."""
    return url or os.environ.get("SAGAWAY_DATABASE_URL") or DEFAULT_URL


def open_store(url: str, *, create: bool = True, token: str | None = None) -> Store:
    """A (not yet opened) store for ``url``: ``sqlite:///…``, ``postgresql://…``, or an Engine
    Server at ``grpc://host:port`` (``grpcs://`` for TLS; ``token``, else ``SAGAWAY_TOKEN``).

    ``create=False``: its ``open()`` opens an existing Sagaway database only, creating nothing
    (no SQLite file or directory, no PostgreSQL schema), and raises ``DatabaseNotFound`` when
    there is none.
    """
    scheme = url.split(":", 1)[0].lower()
    if scheme == "sqlite":
        from sagaway.store.sqlite import SQLiteStore

        return SQLiteStore(url, create=create)
    if scheme in ("postgresql", "postgres"):
        try:
            from sagaway.store.postgres import PostgresStore
        except ImportError as exc:  # psycopg is an optional extra
            raise ImportError(
                "the PostgreSQL backend needs psycopg 3: pip install 'sagaway[postgres]'"
            ) from exc
        return PostgresStore(url, create=create)
    if scheme in ("grpc", "grpcs"):
        from sagaway.store.grpc import GrpcStore  # ImportError names the [server] extra

        return GrpcStore(url, create=create, token=token)
    raise ValueError(
        f"unsupported database URL {url!r}: use sqlite:///path.db, postgresql://user@host/db "
        "or grpc://host:port (an Engine Server)"
    )
