"""Test support for code built on Sagaway: a fake clock, time-skipping managers, an
application's own Manager on a test database (``isolated_manager``), pytest fixtures, and
replays of exported histories against new workflow code (``assert_replays``).

The pytest fixtures ``sagaway_clock``, ``sagaway_db_url`` and ``sagaway_manager`` are registered
automatically when Sagaway is installed (pytest11 entry point).
"""

from __future__ import annotations

from sagaway.testing.clock import FakeClock
from sagaway.testing.isolation import isolated_manager
from sagaway.testing.manager import time_skipping_manager
from sagaway.testing.replay import assert_replays, replay_history

__all__ = [
    "FakeClock",
    "assert_replays",
    "isolated_manager",
    "replay_history",
    "time_skipping_manager",
]
