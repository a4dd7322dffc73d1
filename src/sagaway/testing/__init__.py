"""Test support for code built on Sagaway."""

from __future__ import annotations

from sagaway.testing.clock import FakeClock

__all__ = ["FakeClock"]
