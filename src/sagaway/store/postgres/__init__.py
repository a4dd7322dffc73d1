"""The PostgreSQL dialect: ``PostgresStore`` (``store``) on an async pool (``conn``), LISTEN/NOTIFY
(``listener``) and its verbs by responsibility. It imports neither ``sqlite`` nor ``remote``."""

from __future__ import annotations

from sagaway.store.postgres.store import PostgresStore
from sagaway.store.postgres.url import Timing, parse_postgres_url

__all__ = ["PostgresStore", "Timing", "parse_postgres_url"]
