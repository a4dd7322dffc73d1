"""`sagaway start --priority/--fairness-key/--fairness-weight/--ordering-key/--debounce-key/
--debounce/--debounce-max-wait` (the by-name start and Manager.start_by_name, registered or
not), and the listing filters by priority and fairness key (`sagaway list --priority N
--fairness-key K`, Manager.list_workflows(priority=, fairness_key=)) on every backend."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import sagaway as sw
from sagaway.cli.main import cli


async def sagaway(*args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


def _keys(result: Result) -> list[str]:
    assert result.exit_code == 0, result.output
    return sorted(row["key"] for row in json.loads(result.stdout))


async def test_start_by_name_places_the_start_and_list_filters_it(db_url: str) -> None:
    started = await sagaway(
        "start", "report", '{"n": 1}', "--key", "r-1", "--db", db_url,
        "--priority", "5", "--fairness-key", "tenant-a", "--fairness-weight", "2.5",
        "--ordering-key", "acct-7",
    )  # fmt: skip
    assert started.exit_code == 0, started.output
    burst = [
        "--debounce-key", "ann", "--debounce", "1h", "--debounce-max-wait", "2h",
        "--priority", "1",
    ]  # fmt: skip
    for key in ("r-2", "r-3"):
        result = await sagaway("start", "report", '{"n": 2}', "--key", key, "--db", db_url, *burst)
        assert result.exit_code == 0, result.output
    assert "r-3: joined the debounced run under r-2" in " ".join(result.output.split())
    plain = await sagaway("start", "report", "{}", "--key", "r-4", "--db", db_url)
    assert plain.exit_code == 0, plain.output

    manager = sw.Manager(db_url)
    async with manager.connect():
        first = await manager.get_workflow("r-1").describe()
        assert (first.priority, first.fairness_key, first.fairness_weight) == (5, "tenant-a", 2.5)
        assert first.ordering_key == "acct-7"
        joined = await manager.get_workflow("r-2").describe()  # r-3 joined its burst
        with pytest.raises(sw.WorkflowNotFound):
            await manager.get_workflow("r-3").describe()
        assert (joined.debounce_key, joined.priority) == ("ann", 1)
        assert joined.next_run_at is not None and joined.next_run_at > joined.created_at + 3000
        assert (await manager.get_workflow("r-4").describe()).priority == 3

        by_level = await manager.list_workflows(priority=5)
        assert [d.key for d in by_level] == ["r-1"]
        assert sorted(d.key for d in await manager.list_workflows(priority=3)) == ["r-4"]
        tenant = await manager.list_workflows(fairness_key="tenant-a", status="PENDING")
        assert [d.key for d in tenant] == ["r-1"]
        assert await manager.list_workflows(priority=1, fairness_key="tenant-a") == []

    listed = ["list", "--db", db_url, "--json"]
    assert _keys(await sagaway(*listed, "--priority", "5")) == ["r-1"]
    assert _keys(await sagaway(*listed, "--fairness-key", "tenant-a")) == ["r-1"]
    assert _keys(await sagaway(*listed, "--priority", "1")) == ["r-2"]
    assert _keys(await sagaway(*listed, "--priority", "3", "--fairness-key", "none")) == []


async def test_start_by_name_of_a_registered_workflow_takes_the_options(db_url: str) -> None:
    manager = sw.Manager(db_url)

    @manager.register_workflow
    async def charge(amount: int) -> int:
        return amount

    async with manager.connect():
        handle = await manager.start_by_name(
            "charge",
            {"amount": 3},
            idempotency_key="c-1",
            priority=4,
            fairness_key="t",
            fairness_weight=3,
            ordering_key="acct",
        )
        d = await handle.describe()
        assert (d.priority, d.fairness_key, d.fairness_weight, d.ordering_key) == (
            4, "t", 3.0, "acct",
        )  # fmt: skip
        with pytest.raises(ValueError, match="priority must be an int from 1"):
            await manager.start_by_name("charge", {"amount": 1}, priority=0)
        with pytest.raises(ValueError, match="debounce_key needs debounce"):
            await manager.start_by_name("other", {}, debounce_key="b")
        with pytest.raises(ValueError, match="priority must be an int from 1 to 5"):
            await manager.list_workflows(priority=6)
        assert [w.key for w in await manager.list_workflows(priority=4)] == ["c-1"]


MISUSE = [
    (["--priority", "0"], "Invalid value for '--priority': 0 is not in the range 1<=x<=5"),
    (["--priority", "high"], "Invalid value for '--priority'"),
    (["--fairness-key", ""], "--fairness-key must be a non-empty string"),
    (["--fairness-key", "t", "--fairness-weight", "0"], "'--fairness-weight': 0.0 is not in"),
    (["--fairness-weight", "2"], "--fairness-weight is the share of a --fairness-key"),
    (["--ordering-key", ""], "--ordering-key must be a non-empty string"),
    (["--debounce-key", "b"], "--debounce-key needs --debounce SECONDS"),
    (["--debounce-key", "b", "--debounce", "soon"], "Invalid value for '--debounce'"),
    (["--debounce-key", "b", "--debounce", "-1"], "Invalid value for '--debounce'"),
    (["--debounce", "5"], "--debounce needs a --debounce-key"),
    (["--debounce-max-wait", "5"], "--debounce-max-wait needs a --debounce-key"),
    (
        ["--debounce-key", "b", "--debounce", "1m", "--debounce-max-wait", "30s"],
        "--debounce-max-wait must be at least --debounce",
    ),
]


@pytest.mark.parametrize(("options", "message"), MISUSE)
def test_a_bad_flow_option_is_refused_before_anything_is_stored(
    tmp_path: Path, options: list[str], message: str
) -> None:
    url = f"sqlite:///{tmp_path / 'flow.db'}"
    result = CliRunner().invoke(cli, ["start", "w", "{}", "--key", "k", "--db", url, *options])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()), result.output
    assert not (tmp_path / "flow.db").exists() or _no_workflows(url)


def _no_workflows(url: str) -> Any:
    listed = CliRunner().invoke(cli, ["list", "--db", url, "--json"])
    return listed.exit_code != 0 or json.loads(listed.stdout) == []


@pytest.mark.parametrize("value", ["0", "6", "x"])
def test_list_refuses_a_priority_that_is_no_level(tmp_path: Path, value: str) -> None:
    url = f"sqlite:///{tmp_path / 'flow.db'}"
    result = CliRunner().invoke(cli, ["list", "--db", url, "--priority", value])
    assert result.exit_code == 2 and "Invalid value for '--priority'" in result.output


async def test_start_with_app_places_the_typed_start(db_url: str) -> None:
    app = "tests.integration.cli_typed_app:manager"
    result = await sagaway(
        "start", "place", '{"order": {"id": "o-1", "amount": 3}}', "--key", "a-1",
        "--app", app, "--db", db_url, "--priority", "2", "--fairness-key", "shop",
        "--ordering-key", "o-line",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    manager = sw.Manager(db_url)
    async with manager.connect():
        d = await manager.get_workflow("a-1").describe()
    assert (d.priority, d.fairness_key, d.ordering_key) == (2, "shop", "o-line")
