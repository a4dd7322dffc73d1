"""Notifications when the store reaches PostgreSQL through PgBouncer in transaction mode, and a
pooler the URL does not name.

A LISTEN through such a pooler succeeds and then delivers nothing: the server connection that
holds it is handed to other clients, and a notice that reaches it while no client is linked is
dropped. Its own probe notice came back all the same (a session hears what it sends itself),
so the listener used to count on notices that never came. Now the first probe comes from
another session; with ``pooler=transaction`` the store does not LISTEN through the pooler at
all, and ``listen_url`` names a direct connection for notices.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse

import pytest

from sagaway.store import notices, open_store
from sagaway.store.postgres import listener as _pg_listener
from tests.conftest import POSTGRES_URL
from tests.pgbouncer import POOLER_PARAM
from tests.store_helpers import new

pytestmark = pytest.mark.postgres


async def test_a_listener_through_the_pooler_says_notices_do_not_arrive(
    pgbouncer: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Without ``pooler=transaction`` in the URL the listener finds out by itself: its probe,
    sent by another session, never comes back, so it never says ``Listening``."""
    monkeypatch.setattr(_pg_listener, "_PROBE_WAIT", 0.5)
    heard: list[notices.Notice] = []
    listener = _pg_listener.Listener(
        pgbouncer,
        channel="sagaway_pgbouncer_probe",
        url="through pgbouncer",
        probe_interval=0.5,
        probe_timeout=5.0,
        reconnect_delay=1.0,
        on_reconnect=lambda: None,
    )
    with caplog.at_level(logging.WARNING, logger=_pg_listener.__name__):
        await listener.start(heard.append)
        try:
            await asyncio.sleep(1.0)  # another probe round or two
        finally:
            await listener.close()
    assert heard == []
    assert [r for r in caplog.records if "do not arrive" in r.getMessage()]


async def test_pooler_mode_without_listen_url_polls(
    pgbouncer_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(pgbouncer_url)
    await store.open()
    heard: list[notices.Notice] = []
    try:
        with caplog.at_level(logging.INFO, logger="sagaway.store.postgres.connection"):
            async with asyncio.timeout(1.0):  # no probe to wait for
                await store.listen(heard.append, owner="me")
        await store.create_workflow(new("k1"), now=1.0, lease=None, replace_live=False)
        await asyncio.sleep(0.2)
    finally:
        await store.close()
    assert heard == []
    assert [r for r in caplog.records if "the engine polls" in r.getMessage()]


async def test_listen_url_brings_the_notices_of_the_pooled_statements(pgbouncer_url: str) -> None:
    """``listen_url``: the pool goes through PgBouncer, the listeners straight to the server."""
    direct = urllib.parse.quote(POSTGRES_URL, safe="")
    store = open_store(f"{pgbouncer_url}&listen_url={direct}")
    other = open_store(pgbouncer_url)
    await store.open()
    await other.open()
    heard: list[notices.Notice] = []
    try:
        await store.listen(heard.append, owner="me")
        assert notices.Listening() in heard
        await other.create_workflow(new("k1"), now=1.0, lease=None, replace_live=False)
        async with asyncio.timeout(10):
            while notices.Ready() not in heard:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
    finally:
        await store.close()
        await other.close()


async def test_a_pooler_the_url_does_not_name_is_found_and_nothing_is_prepared(
    pgbouncer_url: str, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Without ``pooler=transaction`` the store sees that the server process running its
    statements is not the one it connected to, says so, and prepares nothing: the sixth run
    of a statement used to fail with ``prepared statement "_pg3_0" does not exist``."""
    unnamed = pgbouncer_url.replace(f"&{POOLER_PARAM}", "")
    assert "pooler" not in unnamed
    with caplog.at_level(logging.WARNING, logger="sagaway.store.postgres.conn"):
        for url in (postgres_url, unnamed):
            store, other = open_store(url), open_store(url)
            await store.open()
            await other.open()
            try:
                await store.create_workflow(new("k1"), now=1.0, lease=None, replace_live=False)
                for _ in range(10):  # two clients, each on several server connections
                    reads = [s.get_workflow("k1") for s in (store, other) for _ in range(8)]
                    assert None not in await asyncio.gather(*reads)
            finally:
                await store.close()
                await other.close()
    found = [r for r in caplog.records if "through a connection pooler" in r.getMessage()]
    port = urllib.parse.urlsplit(unnamed).port
    # Said by each store opened through the pooler, by none of those opened directly.
    assert len(found) == 2 and all(f":{port}/" in r.getMessage() for r in found)
