"""Batches select by search attributes, on every backend (through the Engine Server too):
``WorkflowFilter(where=...)`` with the listing's filter texts (typed: a quoted value is the
string only, a number matches numbers, ``true`` bools, ranges on numbers) or a mapping of
typed equalities; ``sagaway batch ... --attr`` and ``sagaway list --attr``; and ``sagaway show``
printing a workflow's search attributes (``--json`` too)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

import sagaway as sw
from sagaway.cli.main import cli
from tests.integration import batch_app
from tests.integration.test_batch import reaches

S = sw.WorkflowStatus
F = sw.WorkflowFilter
TAGS: dict[str, dict[str, Any]] = {
    "t-1": {"customer": "4711", "amount": 120, "vip": True},
    "t-2": {"customer": 4711, "amount": 80.5, "vip": False},
    "t-3": {"customer": "42", "amount": 500, "vip": True},
}


async def tag(m: sw.Manager) -> None:
    """t-1, t-2, t-3 WAITING for "go", with the search attributes of ``TAGS``; o-1 an order
    without attributes."""
    for key, attributes in TAGS.items():
        await m.workflow("tagged", attributes).execute(idempotency_key=key)
    await m.workflow("order", "o-1").execute(idempotency_key="o-1")
    for key in (*TAGS, "o-1"):
        await reaches(m, key, S.WAITING)

    async def all_tagged() -> bool:
        return all([await m.get_workflow(k).search_attributes() for k in TAGS])

    deadline = asyncio.get_running_loop().time() + 15
    while not await all_tagged():
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.02)


async def sagaway(*args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


async def test_batches_select_by_search_attributes(db_url: str) -> None:
    m = batch_app.build(db_url)
    async with m:
        await tag(m)

        async def selected(f: sw.WorkflowFilter) -> list[str]:
            report = await m.batch("cancel", f, dry_run=True)
            return sorted(i.key for i in report.items)

        assert await selected(F(where=("customer=4711",))) == ["t-1", "t-2"]  # text or number
        assert await selected(F(where=('customer="4711"',))) == ["t-1"]  # the string only
        assert await selected(F(where={"customer": "4711"})) == ["t-1"]  # typed: a str
        assert await selected(F(where=("amount>=100",))) == ["t-1", "t-3"]
        assert await selected(F(where=("amount<100",))) == ["t-2"]
        assert await selected(F(where=("amount>=100", "vip=true"))) == ["t-1", "t-3"]
        assert await selected(F(where={"vip": False})) == ["t-2"]
        assert await selected(F(where="customer=42", key_prefix="t-")) == ["t-3"]
        assert await selected(F(where=("region=eu",))) == []
        assert F(where={"customer": "4711", "vip": True}).where == ('customer="4711"', "vip=true")
        assert F(where=("amount>=100",)).to_json() == {"where": ["amount>=100"]}
        with pytest.raises(ValueError, match="not a search attribute filter"):
            await m.batch("cancel", F(where=("customer",)), dry_run=True)
        with pytest.raises(TypeError):
            F(where={"customer": None})

        report = await m.batch_signal(F(where={"customer": "4711"}), "go", "for t-1")
        assert [(i.key, i.outcome) for i in report.items] == [("t-1", sw.BatchOutcome.DONE)]
        assert await m.get_workflow("t-1").result(timeout=15) == "for t-1"
        assert {k: await m.get_workflow(k).status() for k in ("t-2", "t-3", "o-1")} == {
            "t-2": S.WAITING,
            "t-3": S.WAITING,
            "o-1": S.WAITING,
        }


async def test_the_command_line_filters_batches_and_lists_by_attributes(db_url: str) -> None:
    m = batch_app.build(db_url)
    async with m:
        await tag(m)
    dry = await sagaway(
        "batch", "terminate", "--db", db_url, "--attr", "amount>=100", "--dry-run", "--json"
    )
    assert dry.exit_code == 0, dry.output
    report = json.loads(dry.stdout)
    assert sorted(i["key"] for i in report["items"]) == ["t-1", "t-3"]
    assert report["filter"] == {"where": ["amount>=100"]}

    done = await sagaway(
        "batch", "signal", "go", '"cli"', "--db", db_url,
        "--where", "vip=true", "--attr", "customer=42", "--yes",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "signal: 1 selected (where=['vip=true', 'customer=42']), 1 done" in done.output

    bad = await sagaway("batch", "cancel", "--db", db_url, "--attr", "amount")
    assert bad.exit_code == 2 and "--where" in bad.output and "not a search attribute" in bad.output

    listed = await sagaway("list", "--db", db_url, "--attr", 'customer="4711"', "--json")
    assert listed.exit_code == 0, listed.output
    assert [row["key"] for row in json.loads(listed.stdout)] == ["t-1"]

    async with batch_app.build(db_url) as m:
        assert await m.get_workflow("t-3").result(timeout=15) == "cli"

    shown = await sagaway("show", "t-1", "--db", db_url)
    assert shown.exit_code == 0, shown.output
    assert 'search   amount=120  customer="4711"  vip=true' in shown.output
    as_json = json.loads((await sagaway("show", "t-2", "--db", db_url, "--json")).stdout)
    assert as_json["search_attributes"] == {"amount": 80.5, "customer": 4711, "vip": False}
    plain = json.loads((await sagaway("show", "o-1", "--db", db_url, "--json")).stdout)
    assert plain["search_attributes"] == {}
