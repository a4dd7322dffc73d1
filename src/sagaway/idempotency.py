"""The old import path of ``sagaway.toolkit.idempotency``.

The idempotency-key table: moved to the service-side toolkit; this module keeps code that imports
it from here working, with the same objects."""

from __future__ import annotations

from sagaway.toolkit.idempotency import IdempotencyKeys as IdempotencyKeys
from sagaway.toolkit.idempotency import KeyInProgress as KeyInProgress
from sagaway.toolkit.idempotency import KeyReused as KeyReused
from sagaway.toolkit.idempotency import fingerprint as fingerprint

__all__ = ["IdempotencyKeys", "KeyInProgress", "KeyReused", "fingerprint"]
