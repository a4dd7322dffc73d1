"""`sagaway start` with typed workflows (dataclass arguments and results), with and without
--app: --wait prints the stored result as JSON, wrong arguments exit 2 on one line (one line
per wrong field), and no pydantic warning is printed."""

from __future__ import annotations

import asyncio
import json

from click.testing import CliRunner, Result

from sagaway.cli.main import cli
from tests.integration import cli_typed_app

APP = "tests.integration.cli_typed_app:manager"
ORDER = '{"order": {"id": "o-1", "amount": 3}}'


async def sagaway(*args: str) -> Result:
    """Run the ``sagaway`` command (it runs its own event loop: in a thread)."""
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


def _clean(result: Result) -> None:
    """No traceback, no warning: what the user sees is the command's own output."""
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output and "warning" not in result.output.lower(), (
        result.output
    )


async def test_wait_prints_a_dataclass_result_as_json(db_url: str) -> None:
    async with cli_typed_app.build(db_url):  # a worker
        result = await sagaway(
            "start", "place", ORDER, "--key", "p-1", "--app", APP, "--db", db_url, "--wait"
        )
        _clean(result)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout.splitlines()[-1]) == {"order": "o-1", "total": 3}
        args = '[{"id": "o-2", "amount": 4}, true]'  # positional, typed by the annotations
        result = await sagaway(
            "start", "place", args, "--key", "p-2", "--app", APP, "--db", db_url, "--wait"
        )
        _clean(result)
        assert json.loads(result.stdout.splitlines()[-1]) == {"order": "o-2", "total": 8}
        result = await sagaway(
            "start", "refuse", ORDER, "--key", "p-3", "--app", APP, "--db", db_url, "--wait"
        )
        _clean(result)
        assert result.exit_code == 1 and "order o-1 refused" in result.stderr, result.output


async def test_start_by_name_needs_no_application_code(db_url: str) -> None:
    async with cli_typed_app.build(db_url):  # the worker that has the code
        result = await sagaway("start", "place", ORDER, "--key", "n-1", "--db", db_url, "--wait")
        _clean(result)
        assert result.exit_code == 0, result.output
        assert "n-1: place started" in result.stdout
        assert json.loads(result.stdout.splitlines()[-1]) == {"order": "o-1", "total": 3}
        result = await sagaway(
            "start",
            "billing",
            ORDER,
            "--key",
            "n-2",
            "--task-queue",
            "billing",
            "--db",
            db_url,
            "--wait",
        )
        _clean(result)
        assert json.loads(result.stdout.splitlines()[-1]) == {"order": "o-1", "total": 3}
        result = await sagaway("start", "refuse", ORDER, "--key", "n-3", "--db", db_url, "--wait")
        _clean(result)
        assert result.exit_code == 1 and "order o-1 refused" in result.stderr, result.output
    # Positional arguments need the function's signature.
    result = await sagaway(
        "start", "place", '[{"id": "o-1", "amount": 3}]', "--key", "n-4", "--db", db_url
    )
    assert result.exit_code == 2 and "pass --app" in result.output, result.output


async def test_wrong_arguments_exit_2_on_one_line_per_error(db_url: str) -> None:
    result = await sagaway(
        "start",
        "place",
        '{"ordr": {"id": "o-1", "amount": 3}}',
        "--key",
        "w-1",
        "--app",
        APP,
        "--db",
        db_url,
    )
    _clean(result)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        "error: workflow 'place' has no parameter 'ordr'; it takes (order, twice=False)"
    ]
    result = await sagaway("start", "place", "{}", "--key", "w-2", "--app", APP, "--db", db_url)
    assert result.exit_code == 2 and "missing a required argument: 'order'" in result.stderr
    bad = '{"order": {"id": "o-1", "amount": "three"}}'
    result = await sagaway("start", "place", bad, "--key", "w-3", "--app", APP, "--db", db_url)
    _clean(result)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        "error: argument 'order' of workflow 'place' does not match its annotation (Order):",
        "  amount: Input should be a valid integer, unable to parse string as an integer "
        "(got 'three')",
    ]
    result = await sagaway(
        "start", "place", ORDER, "--key", "w-4", "--app", APP, "--task-queue", "x", "--db", db_url
    )
    assert result.exit_code == 2 and "registered task queue" in result.output, result.output
    # Nothing was stored by the refused starts.
    result = await sagaway("list", "--db", db_url, "--json")
    assert result.exit_code in (0, 3) and "w-" not in result.stdout, result.output
