"""The old import path of ``sagaway.toolkit.outbox.relay``.

The outbox relay: moved to the service-side toolkit; this module keeps code that imports
it from here working, with the same objects."""

from __future__ import annotations

from sagaway.toolkit.outbox.relay import CallbackPublisher as CallbackPublisher
from sagaway.toolkit.outbox.relay import Publisher as Publisher
from sagaway.toolkit.outbox.relay import Relay as Relay

__all__ = ["CallbackPublisher", "Publisher", "Relay"]
