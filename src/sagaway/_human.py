"""Quantities written for people to read, the same in the command line and the console."""

from __future__ import annotations


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
