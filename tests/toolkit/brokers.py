"""The machine's Redis and NATS servers for broker tests: skipped when absent, failed under CI."""

from __future__ import annotations

import os
from typing import Any

import pytest

REDIS_URL = os.environ.get("SAGAWAY_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
NATS_URL = os.environ.get("SAGAWAY_TEST_NATS_URL", "nats://127.0.0.1:4222")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + " (CI=true: broker tests must run)")
    pytest.skip(reason)


def require_redis() -> Any:
    """An asyncio Redis client of the local server (the caller closes it)."""
    try:
        import redis
        import redis.asyncio
    except ImportError:
        _unavailable("the redis client is not installed (pip install 'sagaway[redis]')")
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
    except Exception as exc:
        _unavailable(f"Redis at {REDIS_URL} unreachable: {exc}")
    return redis.asyncio.Redis.from_url(REDIS_URL)


async def require_nats() -> tuple[Any, Any]:
    """(connection, JetStream context) of the local server (the caller closes the connection)."""
    try:
        import nats
    except ImportError:
        _unavailable("the nats client is not installed (pip install 'sagaway[nats]')")
    try:
        nc = await nats.connect(NATS_URL, connect_timeout=3, max_reconnect_attempts=0)
        js = nc.jetstream()
        await js.account_info()
    except Exception as exc:
        _unavailable(f"NATS JetStream at {NATS_URL} unavailable: {exc}")
    return nc, js


def nats_no_stream_error() -> type[BaseException]:
    from nats.js.errors import NoStreamResponseError

    return NoStreamResponseError
