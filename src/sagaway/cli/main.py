"""The ``sagaway`` command line. Calls the public API only.

Each command lives in its own module and is imported only when it runs: ``COMMANDS`` names
where each is and its one-line help, which ``sagaway --help`` lists without importing any
command (a unit test checks the lines against the commands' own help). A new command is one
entry there. This module imports click and nothing heavier, so a command pays only for what it
uses (``sagaway list`` on SQLite loads neither the worker, the server nor the lab).
"""

from __future__ import annotations

import importlib

import click

from sagaway import __version__
from sagaway.cli._exits import EXIT_CODES_HELP

COMMANDS: dict[str, tuple[str, str]] = {
    "audit": (
        "sagaway.cli.audit:audit",
        "List the audit trail: who cancelled, terminated, retried, forked, purged, changed a "
        "schedule, or started or signalled a workflow from the command line or the console; "
        "when (the database's clock) and why.",
    ),
    "batch": (
        "sagaway.cli.batch:batch_command",
        "Cancel, terminate, retry or signal every workflow a filter selects.",
    ),
    "cancel": (
        "sagaway.cli.operations:cancel",
        "Ask a live workflow to cancel, undoing what it did.",
    ),
    "count": ("sagaway.cli.operations:count", "Count workflows per status."),
    "demo": (
        "sagaway.cli.demo:demo",
        "Run the crypto purchase saga twice: once to completion, once compensated.",
    ),
    "events": (
        "sagaway.cli.events:events",
        "Print the events and stream items the workflow KEY published (sw.set_event, "
        "sw.write_stream), oldest first; with --follow, until it has ended.",
    ),
    "fork": (
        "sagaway.cli.fork:fork",
        "Run the ended workflow KEY again under NEW_KEY, from its step N.",
    ),
    "lint": (
        "sagaway.cli.lint:lint",
        "Check workflow and activity code for non-determinism and durability mistakes.",
    ),
    "list": ("sagaway.cli.listing:list_cmd", "List workflows, newest first, a page at a time."),
    "pause": (
        "sagaway.cli.talk:pause",
        "Pause the workflow KEY, or new attempts of an activity or queue everywhere.",
    ),
    "purge": (
        "sagaway.cli.purge:purge",
        "Delete ended workflows (with their steps and signals) older than --older-than.",
    ),
    "replay": (
        "sagaway.cli.replay:replay",
        "Replay recorded executions against the code of MODULE:MANAGER; exit 1 if any diverges.",
    ),
    "resume": (
        "sagaway.cli.talk:resume",
        "Resume a paused workflow KEY (it runs on from where it stopped), or an activity or queue.",
    ),
    "retry": (
        "sagaway.cli.operations:retry",
        "Make a SUSPENDED workflow due now (a running worker picks it up).",
    ),
    "schedule": (
        "sagaway.cli.schedule:schedule_command",
        "Look at and steer schedules (workflows started at the ticks of a cron expression).",
    ),
    "server": (
        "sagaway.cli.server:server",
        "Serve the engine over gRPC: applications use --db grpc://HOST:PORT (or "
        'Manager("grpc://HOST:PORT")) and need no database access of their own.',
    ),
    "show": (
        "sagaway.cli.show:show",
        "Show one workflow: input, result or error, every step with its output and the error of "
        "each attempt, signals (pending, delivered, rejected and why), lease, durations, and the "
        "operator actions on it (who, what, when, why: `sagaway audit` lists them all).",
    ),
    "signal": (
        "sagaway.cli.operations:signal_cmd",
        "Send signal NAME with a JSON PAYLOAD to the workflow KEY.",
    ),
    "start": (
        "sagaway.cli.start:start",
        "Start workflow NAME under KEY (a `sagaway worker` that registered NAME runs it).",
    ),
    "terminate": (
        "sagaway.cli.operations:terminate",
        "End a live workflow now as TERMINATED: no compensation runs, the reason is recorded.",
    ),
    "token": (
        "sagaway.cli.token:token_command",
        "Tokens with roles for `sagaway server --tokens-file` and `sagaway ui --tokens-file`.",
    ),
    "ui": (
        "sagaway.cli.ui:ui",
        "Serve the web console: workflows with live counts, each workflow's steps on a time "
        "axis, and the operator actions (retry, cancel, terminate, signal).",
    ),
    "update": (
        "sagaway.cli.talk:update",
        "Send update NAME with a JSON PAYLOAD to the workflow KEY and print its answer.",
    ),
    "worker": (
        "sagaway.cli.worker:worker",
        "Run the workers of an application's Manager until SIGTERM/SIGINT.",
    ),
}
"""Command name -> (``module:attribute`` of its click command, the first paragraph of its
help as one line). ``sagaway --help`` shows the line, shortened to the terminal's width as
click shortens a command's own help."""


def load_command(name: str) -> click.Command:
    """The click command ``name`` of ``COMMANDS``, imported now."""
    module_name, _, attribute = COMMANDS[name][0].partition(":")
    command = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(command, click.Command):
        raise TypeError(f"{COMMANDS[name][0]} is not a click command")
    return command


class LazyGroup(click.Group):
    """A group whose commands of ``COMMANDS`` are imported when run (or asked for by name);
    commands added with ``add_command`` are kept as a plain group keeps them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.add_command(load_command(cmd_name), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As ``click.Group`` does, with the lines of ``COMMANDS`` for the commands not loaded."""
        listed: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name) or click.Command(name, help=COMMANDS[name][1])
            if not command.hidden:
                listed.append((name, command))
        if not listed:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in listed)
        with formatter.section("Commands"):
            formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in listed])


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    invoke_without_command=True,
    epilog=EXIT_CODES_HELP,
)
@click.version_option(__version__, prog_name="sagaway")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Sagaway: durable sagas for Python.

    Every command takes --db URL (else $SAGAWAY_DATABASE_URL, else sqlite:///sagaway.db).
    list, show and count create nothing: without a Sagaway database they exit 3.
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(0)


def main() -> None:
    cli(prog_name="sagaway")


if __name__ == "__main__":
    main()
