"""The old import path of ``sagaway.toolkit.localdb``.

Local database helpers: moved to the service-side toolkit; this module keeps code that imports
it from here working, with the same objects."""

from __future__ import annotations

from sagaway.toolkit.localdb import Connection as Connection
from sagaway.toolkit.localdb import Dialect as Dialect
from sagaway.toolkit.localdb import connect_sqlite as connect_sqlite
from sagaway.toolkit.localdb import dialect_of as dialect_of
from sagaway.toolkit.localdb import in_transaction as in_transaction
from sagaway.toolkit.localdb import (
    require_transaction_or_implicit as require_transaction_or_implicit,
)
from sagaway.toolkit.localdb import transaction as transaction

__all__ = [
    "Connection",
    "Dialect",
    "connect_sqlite",
    "dialect_of",
    "in_transaction",
    "require_transaction_or_implicit",
    "transaction",
]
