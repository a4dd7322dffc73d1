"""Testing an application's own Manager: the one its module creates and registers on.

Workflows written against a module-level ``manager`` (``await manager.sleep(...)``,
``manager.signal("approval").receive(...)``) must run on that very object, so a test cannot
swap it for a new Manager without monkeypatching the module and registering everything again.
``isolated_manager`` points it, for one test, at a database of the test's own and a
``FakeClock``, and puts its settings back afterwards.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

from sagaway import errors
from sagaway.manager import Manager, ManagerState
from sagaway.store import resolve_url
from sagaway.testing.clock import FakeClock


@contextmanager
def isolated_manager(
    manager: Manager, url: str, clock: FakeClock | None = None, *, retention: bool = False
) -> Iterator[Manager]:
    """Within the block, ``manager`` (closed: open it inside, ``async with manager:``) uses the
    database at ``url`` (say a SQLite file in pytest's ``tmp_path``) and, if given, ``clock``,
    with time-skipping settings; its registrations are kept as they are. On leaving, its URL,
    clock and settings are put back, so the next test may isolate it again.

    Background retention (``Manager(retention=...)``) is off within the block unless
    ``retention=True``: a test decides itself when to purge.

    Raises:
        ManagerStateError: ``manager`` is open (a test isolates it before opening it).
    """
    if manager.state is not ManagerState.CLOSED:
        raise errors.ManagerStateError(
            f"isolated_manager() needs a closed Manager, and {manager!r} is open: isolate it "
            "first, then open it inside the block (async with manager: ...)"
        )
    saved = (manager.url, manager.clock, manager.options, manager._token, manager.retention)
    try:
        manager.url = resolve_url(url)
        manager._token = None  # an Engine Server's token is not for the test's database
        if clock is not None:
            manager.clock = clock
            # As time_skipping_manager: polls and lease heartbeats far apart, so run_until
            # jumps from one real deadline (a timer, a backoff, a signal timeout) to the next.
            manager.options = dataclasses.replace(
                manager.options, poll_interval=3600.0, lease_timeout=10.0**7
            )
        if not retention:
            manager.retention = None
        yield manager
    finally:
        manager.url, manager.clock, manager.options, manager._token, manager.retention = saved
