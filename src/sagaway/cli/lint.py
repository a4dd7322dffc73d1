"""``sagaway lint PATH...``: check workflow and activity code (rules in docs/lint.md).

Exit status: 0 no findings, 1 findings, 2 usage error (a missing path, an unknown rule code),
so CI and pre-commit can gate on it.
"""

from __future__ import annotations

import json

import click

from sagaway.analysis import RULES, lint_paths
from sagaway.analysis.rules import parse_codes
from sagaway.cli._format import safe


def _codes(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Validate --select/--ignore early, as a usage error (exit 2)."""
    try:
        parse_codes(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc
    return value


_HELP = (
    "Check workflow and activity code for non-determinism and durability mistakes.\n\n"
    "PATH may be files or directories (searched for *.py). Exit status: 0 no findings, "
    "1 findings, 2 usage error. Suppress a finding with `# sagaway: ignore[CODE]` on its "
    "line; docs/lint.md explains every rule.\n\n\b\nRules:\n"
    + "\n".join(f"  {rule.code}  {rule.summary}" for rule in RULES.values())
)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@click.command("lint", help=_HELP)
@click.argument(
    "paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=True, path_type=str)
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: `path:line:col: CODE message` lines; json: a list of findings.",
)
@click.option(
    "--select",
    callback=_codes,
    default=None,
    metavar="CODES",
    help="Only these codes or prefixes, comma-separated (e.g. SW1,SW301).",
)
@click.option(
    "--ignore",
    callback=_codes,
    default=None,
    metavar="CODES",
    help="Skip these codes or prefixes, comma-separated.",
)
@click.pass_context
def lint(
    ctx: click.Context,
    paths: tuple[str, ...],
    output_format: str,
    select: str | None,
    ignore: str | None,
) -> None:
    """Run the checker and print the findings (see ``_HELP``)."""
    report = lint_paths(paths, select=select, ignore=ignore)
    if output_format == "json":
        click.echo(json.dumps([f.to_dict() for f in report.findings], indent=2))
    else:
        for finding in report.findings:
            click.echo(safe(finding.format()))
        analysed = ", ".join(
            (
                _plural(report.files, "file"),
                _plural(report.workflows, "workflow"),
                _plural(report.activities, "activity").replace("activitys", "activities"),
            )
        )
        found = _plural(len(report.findings), "finding") if report.findings else "no findings"
        click.echo(f"{found} ({analysed})", err=True)
    ctx.exit(1 if report.findings else 0)
