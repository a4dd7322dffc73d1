"""The old import path of ``sagaway.toolkit.outbox.redis_streams``.

The Redis Streams publisher: moved to the service-side toolkit; this module keeps code that imports
it from here working, with the same objects."""

from __future__ import annotations

from sagaway.toolkit.outbox.redis_streams import RedisStreamPublisher as RedisStreamPublisher
from sagaway.toolkit.outbox.redis_streams import decode_entry as decode_entry
from sagaway.toolkit.outbox.redis_streams import encode_entry as encode_entry

__all__ = ["RedisStreamPublisher", "decode_entry", "encode_entry"]
