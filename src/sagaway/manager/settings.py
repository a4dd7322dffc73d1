"""Checks of the Manager's constructor arguments that are not engine settings (those are
``EngineOptions``): the URL and its token, retention, and the codecs as one chain."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from sagaway import codecs
from sagaway._engine import retention as retention_mod
from sagaway.store import resolve_url


def url(url: str | None, token: str | None) -> str:
    """``Manager(url, token=...)``'s database URL; a token is for an Engine Server only."""
    resolved = resolve_url(url)
    if token is not None and not resolved.lower().startswith("grpc"):
        raise ValueError("token= is for an Engine Server URL (grpc://host:port)")
    return resolved


def retention(
    retention: datetime.timedelta | float | None, interval: datetime.timedelta | float
) -> tuple[float | None, float]:
    """``Manager(retention=..., retention_interval=...)`` in seconds, checked."""
    seconds = None if retention is None else retention_mod.as_seconds(retention, "retention")
    return seconds, retention_mod.as_seconds(interval, "retention_interval")


def codec_chain(
    codec: codecs.Codec | Sequence[codecs.Codec] | codecs.Chain | None, payload_limit: int
) -> codecs.Chain | None:
    """The codecs of ``Manager(codec=...)`` as one chain (None: payloads stored as plain JSON)."""
    if codec is None or isinstance(codec, codecs.Chain):
        return codec
    return codecs.Chain(codec, limit=payload_limit)
