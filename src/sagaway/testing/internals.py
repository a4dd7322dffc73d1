"""A way into an open Manager's engine, for tests that inject faults or watch internal state.

Tests of code built on Sagaway rarely need this; Sagaway's own tests do (wrapping a store method
to fail once, reading whether notifications are flowing). What the Engine offers is not a
stable API: it may change in any release.
"""

from __future__ import annotations

from sagaway._engine.engine import Engine
from sagaway.manager import Manager
from sagaway.store.base import Store
from sagaway.sync import SyncClient


def engine_of(manager: Manager) -> Engine:
    """The Engine of ``manager`` while it is open (``ManagerStateError`` when it is not)."""
    return manager._require_engine()


def store_of(manager: Manager) -> Store:
    """The Store behind ``manager`` while it is open."""
    return engine_of(manager).store


def manager_of(client: SyncClient) -> Manager:
    """The Manager a ``SyncClient`` runs on its own loop (open once the client is)."""
    manager = client._manager
    if not isinstance(manager, Manager):  # a client made by another factory
        raise TypeError(f"this SyncClient runs a {type(manager).__name__}, not a Manager")
    return manager
