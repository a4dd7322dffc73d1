"""``sagaway events`` and ``sagaway list --where`` on every backend: what a workflow published,
as text and JSON, from a seq or a stream's offset; exit 3 for an unknown key; listings by
search attributes, and a malformed filter refused (exit 2) before anything is read."""

from __future__ import annotations

import asyncio
import json

from click.testing import CliRunner, Result

from sagaway.cli.main import cli
from tests.integration.test_events_streams import build


async def sagaway(*args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


async def test_events_prints_what_was_published_and_resumes(db_url: str) -> None:
    m = build(db_url)
    async with m:
        await m.workflow("flaky").execute_get(idempotency_key="f-1", timeout=30)
        await m.workflow("order", "4711", 120.0, "eu").execute_wait(idempotency_key="o-1")
        await m.workflow("order", "4712", 20.0, "us").execute_wait(idempotency_key="o-2")

    text = await sagaway("events", "f-1", "--db", db_url, "--utc")
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["1", "2", "3", "4"]
    assert lines[0].endswith("stream\tprogress[0] 1")
    assert lines[2].endswith('event\tphase = "half"')

    after = await sagaway("events", "f-1", "--db", db_url, "--after", "2", "--json")
    assert [json.loads(line)["seq"] for line in after.output.splitlines()] == [3, 4]
    stream = await sagaway(
        "events", "f-1", "--db", db_url, "--stream", "progress", "--offset", "1", "--follow"
    )
    assert stream.exit_code == 0, stream.output
    assert [line.split("\t")[0] for line in stream.output.splitlines()] == ["1", "2"]
    missing = await sagaway("events", "nope", "--db", db_url)
    assert missing.exit_code == 3

    listed = await sagaway("list", "--db", db_url, "--where", "customer=4711", "--json")
    assert listed.exit_code == 0, listed.output
    assert [row["key"] for row in json.loads(listed.output)] == ["o-1"]
    both = await sagaway(
        "list", "--db", db_url, "--where", "amount<100", "--where", "region=us", "--json"
    )
    assert [row["key"] for row in json.loads(both.output)] == ["o-2"]
    bad = await sagaway("list", "--db", db_url, "--where", "customer")
    assert bad.exit_code == 2 and "--where" in bad.output
