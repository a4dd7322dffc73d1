"""The store contract under its first name: ``sagaway.store.base`` re-exports
``sagaway.store.contract``, where the protocol and its errors are defined."""

from __future__ import annotations

from sagaway.store.contract import (
    CancelPending,
    CreateResult,
    DatabaseNotFound,
    PermissionDenied,
    Store,
    StoreUnavailable,
)

__all__ = [
    "CancelPending",
    "CreateResult",
    "DatabaseNotFound",
    "PermissionDenied",
    "Store",
    "StoreUnavailable",
]
