"""Quantities written for people to read, the same in the command line and the console."""

from __future__ import annotations

import datetime
import re
import time

_AGO = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d|w)\s*$")
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}


def moment(value: str, *, utc: bool, now: float | None = None) -> float:
    """Epoch seconds of what an operator typed: an ISO 8601 date or date-time (without an
    offset: UTC if ``utc``, else in the local zone) or a duration ago (``90s``, ``15m``, ``2h``,
    ``3d``, ``1w``). ``ValueError`` if it is neither (the caller says how to write one)."""
    now = time.time() if now is None else now
    ago = _AGO.match(value)
    if ago:
        return now - float(ago.group(1)) * _UNIT[ago.group(2)]
    parsed = datetime.datetime.fromisoformat(value.strip())
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC) if utc else parsed.astimezone()
    return parsed.timestamp()


def duration(seconds: float) -> str:
    """A duration in human units: 850 ms, 2.3 s, 4 min 10 s, 3 h 2 min, 2 d 4 h (a negative
    one reads as none)."""
    seconds = max(seconds, 0.0)
    if seconds < 0.9995:
        ms = seconds * 1000
        return f"{ms:.1f} ms" if ms < 9.95 else f"{ms:.0f} ms"
    if seconds < 59.95:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60} min"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"
