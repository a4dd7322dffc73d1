"""Terminal escapes (issue 33, finding 4): keys and names with control characters are refused at
every way in, and what the CLI prints from the database never carries a raw control character
(ESC starting a CSI or OSC sequence, CR overwriting a row, C1 controls), on every backend: rows
written by an older version or straight into the database included.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

import sagaway as sw
from sagaway.identifiers import MAX_NAME
from tests.integration.test_bad_input import invoke_cli, make_manager, run_sql

CLEAR = "\x1b[2J"
LINK = "\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07"
SPOOF = "\rPAY-1  transfer  COMPLETED"
HOSTILE = f"bad{CLEAR}{LINK}{SPOOF}\x9b31m"
RAW = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")
"""A control character other than a line break: what must never reach the terminal."""


def assert_inert(text: str) -> None:
    found = RAW.search(text)
    assert found is None, f"raw control character {found.group()!r} in {text!r}"


async def test_control_characters_in_keys_and_names_are_refused(db_url: str) -> None:
    manager = make_manager(db_url)

    @manager.register_workflow
    async def listens() -> Any:
        return await manager.signal("ok").receive()

    for bad in ("a\x1bb", "a\nb", "a\tb", "a\rb", "a\x7fb", "a\x85b"):
        with pytest.raises(ValueError, match="control characters"):
            manager.register_workflow(name=f"wf{bad}")(listens)
        with pytest.raises(ValueError, match="control characters"):
            manager.register_activity(name=f"act{bad}")(lambda: None)
        with pytest.raises(ValueError, match="control characters"):
            manager.signal(f"sig{bad}")
    with pytest.raises(ValueError, match=f"at most {MAX_NAME} characters"):
        manager.register_workflow(name="w" * (MAX_NAME + 1))(listens)
    async with manager:
        handle = await manager.workflow(listens).execute(idempotency_key="k")
        with pytest.raises(ValueError, match=r"idempotency_key .*'\\x1b' at position 3"):
            await manager.workflow(listens).execute(idempotency_key=f"key{CLEAR}")
        with pytest.raises(ValueError, match="control characters"):
            await manager.workflow(listens).execute(idempotency_key="key\r\n")
        assert await manager.signal("ok").send("k", "fine")
        assert await handle.result(timeout=10) == "fine"
    result = await invoke_cli(["signal", "k", f"ok{CLEAR}", "--db", db_url])
    assert result.exit_code == 2, result.output
    assert "control characters" in result.output
    assert_inert(result.output)


@pytest.mark.direct_db
async def test_list_and_show_escape_what_the_database_holds(db_url: str) -> None:
    manager = make_manager(db_url)

    @manager.register_activity
    async def hostile() -> None:
        raise sw.CompletableError(f"declined{CLEAR}\n{LINK}{SPOOF}")

    @manager.register_workflow
    async def pay() -> None:
        await manager.activity(hostile).execute_wait()

    async with manager:
        handle = await manager.workflow(pay).execute(idempotency_key="pay")
        with pytest.raises(sw.CompletableError):
            await handle.result(timeout=10)
    # Rows stored before keys and names were checked (or written around Sagaway).
    assert run_sql(
        db_url, "UPDATE workflows SET key = ?, name = ? WHERE key = ?", HOSTILE, f"pay{LINK}", "pay"
    )
    assert run_sql(db_url, "UPDATE steps SET name = ?", f"hostile{CLEAR}")

    listed = await invoke_cli(["list", "--db", db_url])
    assert listed.exit_code == 0, listed.output
    assert_inert(listed.output)
    assert "bad\\x1b[2J" in listed.output and "\\rPAY-1" in listed.output
    assert len(listed.output.splitlines()) == 4  # title, header, rule, one row: no spoofed row

    for extra in ([], ["--traceback"]):
        shown = await invoke_cli(["show", HOSTILE, "--db", db_url, *extra])
        assert shown.exit_code == 0, shown.output
        assert_inert(shown.output)
        assert "declined\\x1b[2J\\n\\x1b]8;;https://evil.example/\\x07click" in shown.output
        assert "hostile\\x1b[2J" in shown.output
    traced = await invoke_cli(["show", HOSTILE, "--db", db_url, "--traceback"])
    assert "Traceback (most recent call last):\n" in traced.output  # its lines are kept
    unknown = await invoke_cli(["show", f"nothing{CLEAR}", "--db", db_url])
    assert unknown.exit_code == 3
    assert_inert(unknown.output)


def test_show_follow_prints_each_change_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    from sagaway.cli import _format, show

    events: list[dict[str, Any]] = [
        {
            "event": "step",
            "call_id": 1,
            "name": f"charge{CLEAR}",
            "status": "FAILED",
            "attempts": 1,
            "error": {"type": f"E{SPOOF}", "message": f"no{LINK}"},
            "result": None,
            "started_at": 1.0,
            "ended_at": 2.0,
        },
        {
            "event": "signal",
            "id": 1,
            "name": f"approve{SPOOF}",
            "state": "rejected",
            "rejected": f"bad\n{CLEAR}",
            "sent_at": 1.0,
            "handled_at": 2.0,
        },
        {
            "event": "status",
            "status": "FAILED",
            "waiting_for": f"w{LINK}",
            "ended": True,
            "duration": 2.0,
            "error": {"type": "E", "message": f"x\x9b2J{CLEAR}"},
            "updated_at": 3.0,
        },
    ]
    for event in events:
        show._print_event(event, _format.Clock(utc=True))
    printed = capsys.readouterr().out
    assert_inert(printed)
    assert len(printed.splitlines()) == 3  # one line per change, none spoofed
    assert "charge\\x1b[2J" in printed and "approve\\rPAY-1" in printed
