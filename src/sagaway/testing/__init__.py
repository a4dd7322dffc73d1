"""Test support for code built on Sagaway: a fake clock, time-skipping managers, pytest fixtures.

The pytest fixtures ``sagaway_clock``, ``sagaway_db_url`` and ``sagaway_manager`` are registered
automatically when Sagaway is installed (pytest11 entry point).
"""

from __future__ import annotations

from sagaway.testing.clock import FakeClock
from sagaway.testing.manager import time_skipping_manager

__all__ = ["FakeClock", "time_skipping_manager"]
