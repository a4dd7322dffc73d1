"""Fixtures of the Store contract tests: ``store`` opens the store on each backend's fresh
database (``db_url``), ``other`` opens a second one on the same database."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from sagaway.store import Store, open_store


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    s = open_store(db_url)
    await s.open()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def other(db_url: str, store: Store) -> AsyncIterator[Store]:
    """A second store on the same database (another process, as far as the data goes)."""
    s = open_store(db_url)
    await s.open()
    try:
        yield s
    finally:
        await s.close()
