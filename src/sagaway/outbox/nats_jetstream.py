"""The old import path of ``sagaway.toolkit.outbox.nats_jetstream``.

The NATS JetStream publisher: moved to the service-side toolkit; this module keeps code that imports
it from here working, with the same objects."""

from __future__ import annotations

from sagaway.toolkit.outbox.nats_jetstream import MESSAGE_ID_HEADER as MESSAGE_ID_HEADER
from sagaway.toolkit.outbox.nats_jetstream import TOPIC_HEADER as TOPIC_HEADER
from sagaway.toolkit.outbox.nats_jetstream import JetStreamPublisher as JetStreamPublisher
from sagaway.toolkit.outbox.nats_jetstream import decode_message as decode_message

__all__ = ["JetStreamPublisher", "MESSAGE_ID_HEADER", "TOPIC_HEADER", "decode_message"]
