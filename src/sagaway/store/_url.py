"""What the store URLs of every dialect read the same way."""

from __future__ import annotations

import math


def positive_seconds(name: str, value: str) -> float:
    """``value``, a URL parameter ``name`` giving seconds, as a finite number above zero
    (``ValueError`` naming the parameter otherwise)."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
    return seconds
