"""The audit trail on the command line, on SQLite, PostgreSQL and the Engine Server: the
operator commands record who, what, when and why (``--reason``), ``sagaway show`` lists a
workflow's entries (text and ``--json``), ``sagaway audit`` lists and filters the whole trail
(purged workflows included), and text from the database reaches the terminal escaped."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from sagaway.cli.main import cli
from sagaway.principals import local_actor
from tests.store_helpers import raw_sql


async def sagaway(*args: str) -> Result:
    """Run the ``sagaway`` command (it runs its own event loop: in a thread)."""
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args), input="")


def _json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def who(db_url: str) -> tuple[str, str | None]:
    """(actor, on_behalf_of) of this process's entries (a server signs them itself)."""
    if db_url.startswith("grpc"):
        return "anonymous@127.0.0.1", local_actor()
    return local_actor(), None


async def test_operator_commands_are_recorded_and_shown(db_url: str) -> None:
    db = ("--db", db_url)
    started = await sagaway(
        "start", "report", '{"day": 1}', "--key", "r-1", *db, "--reason", "rerun"
    )
    assert started.exit_code == 0, started.output
    sent = await sagaway(
        "signal", "r-1", "go", "true", *db, "--wait-delivery", "0", "--reason", "approved"
    )
    assert sent.exit_code == 0, sent.output
    cancelled = await sagaway("cancel", "r-1", *db, "--reason", "customer asked")
    assert cancelled.exit_code == 0, cancelled.output
    retried = await sagaway("retry", "r-1", *db, "--reason", "is it stuck?")
    assert retried.exit_code == 1  # not SUSPENDED: refused, and not recorded
    assert (await sagaway("start", "report", "{}", "--key", "r-2", *db)).exit_code == 0
    assert (await sagaway("terminate", "r-2", *db)).exit_code == 0

    data = _json(await sagaway("show", "r-1", *db, "--json"))
    actions = [(e["action"], e["reason"]) for e in data["audit"]]
    assert actions == [("start", "rerun"), ("signal", "approved"), ("cancel", "customer asked")]
    for entry in data["audit"]:
        assert (entry["actor"], entry["on_behalf_of"]) == who(db_url)
        assert entry["target"] == "r-1" and entry["run_id"] == data["run_id"]
        assert isinstance(entry["at"], float) and entry["at_iso"]
    assert data["audit"][1]["details"] == {"signal": "go"}

    text = await sagaway("show", "r-1", *db)
    assert text.exit_code == 0, text.output
    assert "audit (operator actions, oldest first)" in text.output
    assert "cancel  by " in text.output and "reason 'customer asked'" in text.output

    trail = _json(await sagaway("audit", *db, "--json"))
    assert [(e["action"], e["target"]) for e in trail] == [
        ("terminate", "r-2"),
        ("start", "r-2"),
        ("cancel", "r-1"),
        ("signal", "r-1"),
        ("start", "r-1"),
    ]
    assert trail[0]["reason"] == "terminated from the command line"
    picked = _json(await sagaway("audit", *db, "--json", "--action", "cancel,terminate"))
    assert [e["target"] for e in picked] == ["r-2", "r-1"]
    assert len(_json(await sagaway("audit", *db, "--json", "--key", "r-1"))) == 3
    assert _json(await sagaway("audit", *db, "--json", "--since", "2099-01-01")) == []
    assert len(_json(await sagaway("audit", *db, "--json", "--since", "1h"))) == 5
    assert len(_json(await sagaway("audit", *db, "--json", "--actor", who(db_url)[0]))) == 5
    page = await sagaway("audit", *db, "--limit", "2")
    assert page.exit_code == 0 and f"next page: --before {trail[1]['seq']}" in page.output
    assert "terminate" in page.output and "r-2" in page.output
    assert "r-1" not in page.output.split("next page")[0]


async def test_the_purge_is_recorded_and_the_trail_outlives_it(db_url: str) -> None:
    db = ("--db", db_url)
    assert (await sagaway("start", "report", "{}", "--key", "gone", *db)).exit_code == 0
    assert (await sagaway("terminate", "gone", *db, "--reason", "obsolete")).exit_code == 0
    await asyncio.sleep(1.1)  # the purge's unit is the second: end it a second ago
    purged = await sagaway("purge", *db, "--older-than", "1s", "--yes", "--reason", "tidy up")
    assert purged.exit_code == 0, purged.output
    assert "purged 1 workflows" in purged.output
    assert (await sagaway("show", "gone", *db)).exit_code == 3  # the workflow is gone
    trail = _json(await sagaway("audit", *db, "--json"))
    assert [(e["action"], e["target"], e["reason"]) for e in trail] == [
        ("purge", None, "tidy up"),
        ("terminate", "gone", "obsolete"),
        ("start", "gone", None),
    ]
    assert trail[0]["details"]["deleted"] == 1


async def test_bad_input_is_refused_before_anything_is_done(db_url: str) -> None:
    db = ("--db", db_url)
    assert (await sagaway("start", "report", "{}", "--key", "k", *db)).exit_code == 0
    too_long = await sagaway("retry", "k", *db, "--reason", "x" * 1001)
    assert too_long.exit_code == 2 and "at most 1000 characters" in too_long.output
    unknown = await sagaway("audit", *db, "--action", "delete")
    assert unknown.exit_code == 2 and "unknown action delete" in unknown.output
    assert [e["action"] for e in _json(await sagaway("audit", *db, "--json"))] == ["start"]


async def test_audit_without_a_database_creates_none(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/none.db"
    result = await sagaway("audit", "--db", url)
    assert result.exit_code == 3
    assert not (tmp_path / "none.db").exists()


@pytest.mark.direct_db  # it writes a hostile row behind the store's back
async def test_stored_text_reaches_the_terminal_escaped(db_url: str) -> None:
    db = ("--db", db_url)
    assert (await sagaway("start", "report", "{}", "--key", "k", *db)).exit_code == 0
    [(run_id,)] = raw_sql(db_url, "SELECT run_id FROM workflows")
    raw_sql(
        db_url,
        "INSERT INTO audit_log (entry_id, actor, on_behalf_of, action, run_id, target, reason) "
        f"VALUES ('evil', 'ev\x1b]8;;http://x\x07il', 'a\rb', 'cancel', '{run_id}', 'k', "
        "'clear\x1b[2J screen\nnew line')",
    )
    for args in (("audit",), ("show", "k")):
        result = await sagaway(*args, *db)
        assert result.exit_code == 0, result.output
        assert "\x1b" not in result.output and "\r" not in result.output
        assert "\\x1b[2J" in result.output and "\\x1b]8;;http://x\\x07il" in result.output
        assert "\\r" in result.output and "\\n" in result.output
