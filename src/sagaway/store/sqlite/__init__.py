"""The SQLite dialect: ``SQLiteStore`` (``store``) on a writer thread (``jobs``, ``checkpoint``,
``connect``) and its verbs by responsibility. It imports neither ``postgres`` nor ``remote``."""

from __future__ import annotations

from sagaway.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
