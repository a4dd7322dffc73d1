"""SyncClient.start / execute_get with execute()'s order, debounce, priority and fairness
options, by name (a client by URL) and by function (manager.sync()), on every backend. No
workers run: the starts stay PENDING, in line, as the options placed them."""

from __future__ import annotations

import pytest

import sagaway as sw


def test_a_client_by_url_places_its_starts(db_url: str) -> None:
    with sw.SyncClient(db_url) as client:
        first = client.start(
            "report", key="s-1", n=1, priority=5, fairness_key="t", fairness_weight=2,
            ordering_key="acct",
        )  # fmt: skip
        d = first.describe()
        assert (d.priority, d.fairness_key, d.fairness_weight, d.ordering_key) == (
            5, "t", 2.0, "acct",
        )  # fmt: skip
        assert d.input == {"n": 1}  # the options are not the workflow's arguments
        burst = {"debounce_key": "b", "debounce": 3600.0, "debounce_max_wait": 7200.0}
        one = client.start("report", key="s-2", n=2, **burst)
        two = client.start("report", key="s-3", n=3, **burst)
        assert two.key == one.key == "s-2"  # the second start joined the burst
        joined = one.describe()
        assert joined.debounce_key == "b" and joined.input == {"n": 3}
        with pytest.raises(TimeoutError):
            client.execute_get("report", key="s-4", priority=1, wait_timeout=0.05)
        assert client.get_workflow("s-4").describe().priority == 1
        with pytest.raises(ValueError, match="priority must be an int from 1"):
            client.start("report", key="s-5", priority=9)
        with pytest.raises(ValueError, match="debounce_key needs debounce"):
            client.start("report", key="s-6", debounce_key="x")


def test_a_managers_client_places_starts_of_its_functions(db_url: str) -> None:
    manager = sw.Manager(db_url)

    @manager.register_workflow
    async def charge(amount: int) -> int:
        return amount

    with manager.sync() as client:
        d = client.start(charge, 5, key="c-1", priority=2, ordering_key="o").describe()
        assert (d.priority, d.ordering_key, d.input) == (2, "o", {"amount": 5})
        by_name = client.start("charge", key="c-2", amount=1, fairness_key="t").describe()
        assert (by_name.fairness_key, by_name.priority) == ("t", 3)


def test_a_parameter_of_the_workflows_own_stays_its_argument(db_url: str) -> None:
    """``start(fn, **kwargs)`` passed every keyword but its own options to the workflow before
    these options existed: a workflow whose parameter has one of their names still gets it."""
    manager = sw.Manager(db_url)

    @manager.register_workflow
    async def ship(order: str, priority: str) -> str:
        return f"{order}:{priority}"

    with manager.sync() as client:
        d = client.start(ship, "o-1", key="p-1", priority="express", fairness_key="t")
        described = d.describe()
        assert described.input == {"order": "o-1", "priority": "express"}
        assert (described.priority, described.fairness_key) == (3, "t")
        name = manager.registry.workflow(ship).name  # registered here: its parameters known
        by_name = client.start(name, key="p-2", order="o-2", priority="slow").describe()
        assert by_name.input == {"order": "o-2", "priority": "slow"} and by_name.priority == 3
