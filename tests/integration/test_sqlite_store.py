"""SQLite-only behaviour of the store (the rest is in the contract suite, on both backends)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sagaway.store import open_store
from sagaway.store.sqlite import parse_sqlite_url


async def test_cancelled_open_does_not_hang_and_the_store_reopens(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    opening = asyncio.ensure_future(store.open())
    await asyncio.sleep(0)
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(opening, 10)
    await asyncio.wait_for(store.open(), 10)  # a stop signal from before must not kill it
    assert await store.count_by_status() == {}
    await store.close()


def test_url_forms(tmp_path: Path) -> None:
    assert parse_sqlite_url("sqlite:///app.db") == ("app.db", {})
    assert parse_sqlite_url(f"sqlite:///{tmp_path}/a.db?synchronous=full") == (
        f"{tmp_path}/a.db",
        {"synchronous": "full"},
    )
    with pytest.raises(ValueError, match="without a file path"):
        parse_sqlite_url("sqlite://")
    with pytest.raises(ValueError, match="synchronous must be one of"):
        open_store("sqlite:///x.db?synchronous=sometimes")
    with pytest.raises(ValueError, match="unknown sqlite URL options"):
        open_store("sqlite:///x.db?journal=wal")
