"""The Engine Server's client dialect: ``GrpcStore`` (``client``), call batching (``batching``),
the server address (``target``), errors (``errors``) and the record <-> message mapping
(``wire``, shared with the server). It imports neither ``sqlite`` nor ``postgres``."""

from __future__ import annotations

from sagaway.store.remote.client import GrpcStore
from sagaway.store.remote.errors import ServerRefused

__all__ = ["GrpcStore", "ServerRefused"]
