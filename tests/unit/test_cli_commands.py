"""``sagaway`` imports a command only when it runs: its table of commands must tell the truth,
and ``--help``, ``list`` and ``show`` must not load what they do not use."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from sagaway.cli.main import COMMANDS, load_command


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_table_says_what_each_command_says(name: str) -> None:
    command = load_command(name)
    assert command.name == name
    assert command.get_short_help_str(limit=10_000) == COMMANDS[name][1]
    assert not command.hidden


def _python(code: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


_HELP_THEN_LOADED = """
import json, sys
from click.testing import CliRunner
from sagaway.cli.main import COMMANDS, cli
runner = CliRunner()
lazy = runner.invoke(cli, ["--help"], terminal_width=int(sys.argv[1])).output
loaded = sorted(m for m in sys.modules if m.startswith("sagaway.") and m.count(".") >= 1)
for name in COMMANDS:  # now every command is imported: the help comes from them
    cli.get_command(None, name)
eager = runner.invoke(cli, ["--help"], terminal_width=int(sys.argv[1])).output
print(json.dumps({"lazy": lazy, "eager": eager, "loaded": loaded}))
"""


@pytest.mark.parametrize("width", [40, 80, 200])
def test_help_lists_the_commands_as_they_describe_themselves_without_importing_them(
    width: int,
) -> None:
    seen = json.loads(_python(_HELP_THEN_LOADED, str(width)))
    assert seen["lazy"] == seen["eager"]
    assert "list " in seen["lazy"] and "Exit codes:" in seen["lazy"]
    assert seen["loaded"] == ["sagaway.cli", "sagaway.cli._exits", "sagaway.cli.main"]


def test_a_command_added_at_run_time_is_listed_and_runs() -> None:
    from sagaway.cli.main import cli

    @click.command("zz-extra")
    def extra() -> None:
        """An extra command."""
        click.echo("ran")

    cli.add_command(extra)
    try:
        from click.testing import CliRunner

        runner = CliRunner()
        lines = runner.invoke(cli, ["--help"]).output.splitlines()
        assert [line.split() for line in lines if "zz-extra" in line] == [
            ["zz-extra", "An", "extra", "command."]
        ]
        assert runner.invoke(cli, ["zz-extra"]).output == "ran\n"
    finally:
        del cli.commands["zz-extra"]


_MODULES_OF_A_RUN = """
import contextlib, io, json, runpy, sys
sys.argv = ["sagaway", *sys.argv[1:]]
with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()):
    try:
        runpy.run_module("sagaway", run_name="__main__")
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

_NOT_FOR_READING = (
    "grpc",
    "opentelemetry",
    "prometheus_client",
    "psycopg",
    "sagaway.analysis",
    "sagaway.cli.demo",
    "sagaway.cli.lab",
    "sagaway.cli.server",
    "sagaway.cli.ui",
    "sagaway.cli.worker",
    "sagaway.console",
    "sagaway.demo",
    "sagaway.lab",
    "sagaway.server",
    "sagaway.store.postgres",
    "sagaway.store.remote",
    "sagaway.telemetry",
    "sagaway.toolkit",
)
"""What ``sagaway list`` and ``sagaway show`` on SQLite have no use for."""


@pytest.mark.parametrize("command", [["list"], ["show", "nowhere"], ["count"]])
def test_reading_commands_on_sqlite_load_no_server_driver_telemetry_or_lab(
    tmp_path: object, command: list[str]
) -> None:
    url = f"sqlite:///{tmp_path}/absent.db"  # exit 3, once the store is imported and opened
    seen = json.loads(_python(_MODULES_OF_A_RUN, command[0], "--db", url, *command[1:]))
    assert seen["code"] == 3
    assert "sagaway.store.sqlite" in seen["modules"]
    unused = [m for m in seen["modules"] if m.startswith(_NOT_FOR_READING)]
    assert unused == []
