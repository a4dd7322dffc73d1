"""The Engine Server's client store under its public name: ``sagaway.store.grpc`` re-exports
``sagaway.store.remote`` (client, batching, target, wire)."""

from __future__ import annotations

from sagaway.store.remote.client import GrpcStore
from sagaway.store.remote.errors import ServerRefused

__all__ = ["GrpcStore", "ServerRefused"]
