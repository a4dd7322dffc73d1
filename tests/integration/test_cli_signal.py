"""`sagaway signal` to a workflow that waits for another name: sent, kept (early signals still
work), and a note on stderr naming the signal it waits for; a rejected payload is told one
line per wrong field."""

from __future__ import annotations

import asyncio
import json
import time

from click.testing import CliRunner, Result

import sagaway as sw
from sagaway.cli.main import cli
from tests.integration import cli_typed_app


async def sagaway(*args: str) -> Result:
    """Run the ``sagaway`` command (it runs its own event loop: in a thread)."""
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


async def _waiting_for(m: sw.Manager, key: str, what: str) -> None:
    deadline = time.monotonic() + 10
    while (await m.get_workflow(key).describe()).waiting_for != what:
        assert time.monotonic() < deadline, f"{key} never waited for {what}"
        await asyncio.sleep(0.02)


async def test_a_signal_of_another_name_is_kept_with_a_note(db_url: str) -> None:
    m = cli_typed_app.build(db_url)
    async with m:
        await m.workflow("two_steps").execute(idempotency_key="t-1")
        await _waiting_for(m, "t-1", "signal:first")
        result = await sagaway("signal", "t-1", "second", '"b"', "--db", db_url)
        assert result.exit_code == 0, result.output
        assert "t-1: signal 'second' sent" in result.stdout
        assert result.stderr.splitlines() == [
            "note: t-1 waits for signal 'first', not 'second': is the name right?"
        ]
        # The early signal is kept: the workflow gets it once it asks for it.
        result = await sagaway("signal", "t-1", "first", '"a"', "--db", db_url)
        assert result.exit_code == 0 and "delivered" in result.stdout, result.output
        assert result.stderr == ""
        assert await m.get_workflow("t-1").result(timeout=10) == ["a", "b"]


async def test_a_rejected_payload_is_one_line_per_field(db_url: str) -> None:
    m = cli_typed_app.build(db_url)
    async with m:
        await m.workflow("approve").execute(idempotency_key="a-1")
        await _waiting_for(m, "a-1", "signal:approval")
        result = await sagaway("signal", "a-1", "approval", '{"amount": "abc"}', "--db", db_url)
        assert result.exit_code == 1, result.output
        assert result.stderr.splitlines() == [
            "a-1: signal 'approval' was rejected: signal payload does not fit Approval:",
            "  amount: Input should be a valid integer, unable to parse string as an integer "
            "(got 'abc')",
            "  by: Field required",
        ]
        shown = json.loads((await sagaway("show", "a-1", "--db", db_url, "--json")).stdout)
        assert shown["signals"][0]["rejected"].splitlines()[1:] == result.stderr.splitlines()[1:]
        good = '{"amount": 5, "by": "rin"}'
        result = await sagaway("signal", "a-1", "approval", good, "--db", db_url)
        assert result.exit_code == 0 and "delivered" in result.stdout, result.output
        assert await m.get_workflow("a-1").result(timeout=10) == cli_typed_app.Approval(5, "rin")
