"""The old import path of ``sagaway.toolkit.outbox``.

The transactional outbox: moved to the service-side toolkit; this module keeps code that imports
it from here working, with the same objects."""

from __future__ import annotations

from sagaway.toolkit.outbox import CallbackPublisher as CallbackPublisher
from sagaway.toolkit.outbox import Inbox as Inbox
from sagaway.toolkit.outbox import JetStreamPublisher as JetStreamPublisher
from sagaway.toolkit.outbox import Message as Message
from sagaway.toolkit.outbox import Outbox as Outbox
from sagaway.toolkit.outbox import Publisher as Publisher
from sagaway.toolkit.outbox import RedisStreamPublisher as RedisStreamPublisher
from sagaway.toolkit.outbox import Relay as Relay
from sagaway.toolkit.outbox import UnroutableMessage as UnroutableMessage
from sagaway.toolkit.outbox import WorkflowPublisher as WorkflowPublisher

__all__ = [
    "CallbackPublisher",
    "Inbox",
    "JetStreamPublisher",
    "Message",
    "Outbox",
    "Publisher",
    "RedisStreamPublisher",
    "Relay",
    "UnroutableMessage",
    "WorkflowPublisher",
]
