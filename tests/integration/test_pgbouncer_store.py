"""The Store contract through PgBouncer in transaction pooling mode (issue 36).

A representative subset of the contract tests (workflows, steps, signals and waits) runs here
with ``db_url`` a fresh schema reached through a PgBouncer that hands every transaction
whichever server connection is free: nothing may rely on session state (the search path, a
prepared statement) surviving from one transaction to the next. Without the store's pooler
mode they failed with ``relation "workflows" does not exist`` and ``prepared statement
"_pg3_0" does not exist``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration import (
    test_store_signals_and_waits,
    test_store_steps,
    test_store_workflows,
)

pytestmark = pytest.mark.postgres


@pytest.fixture
def db_url(pgbouncer_url: str) -> str:
    """The contract tests' database: a fresh schema through PgBouncer."""
    return pgbouncer_url


PLAIN_STEPS = {
    "test_record_step_upserts_and_load_steps_orders",  # fires the trigger of migration 23
    "test_concurrent_step_writes_keep_every_outcome_and_fence_each",
    "test_finish_failed",
}
"""The step tests of a plain run; the others run with the long suites (``-m long``)."""


def _long(test: Callable[..., Any]) -> Callable[..., Any]:
    """``test`` marked long here only (a wrapper: the contract module's own stays plain)."""

    @functools.wraps(test)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        return await test(*args, **kwargs)

    return pytest.mark.long(wrapper)


def _contract_tests() -> dict[str, Callable[..., Any]]:
    found: dict[str, Callable[..., Any]] = {}
    for module in (test_store_workflows, test_store_steps, test_store_signals_and_waits):
        for name, value in vars(module).items():
            if name.startswith("test_") and callable(value):
                plain = module is not test_store_steps or name in PLAIN_STEPS
                found[name] = value if plain else _long(value)
    return found


globals().update(_contract_tests())
