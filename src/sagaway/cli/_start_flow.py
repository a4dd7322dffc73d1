"""The options of ``sagaway start`` that place a start in line: its priority and fairness, its
per-key order and debounce (as ``execute()`` takes them, docs/limits.md). Values out of range
and options that need another are refused here, exit 2, before anything is stored."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import click

from sagaway._engine import flow, flow_control
from sagaway.cli._options import priority_option, stacked
from sagaway.cli.purge import parse_duration

F = TypeVar("F", bound=Callable[..., Any])

NAMES = (
    "priority",
    "fairness_key",
    "fairness_weight",
    "ordering_key",
    "debounce_key",
    "debounce",
    "debounce_max_wait",
)
"""The keyword arguments of ``execute()``/``start_by_name()`` these options give."""


def _seconds(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """A plain number of seconds (``1.5``, ``0``) or a duration (``90s``, ``15m``, ``1h30m``)."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    if not 0 <= seconds < float("inf"):
        raise click.BadParameter(f"{value!r} is not a number of seconds >= 0 (or 90s, 15m, 2h)")
    return seconds


def flow_options(fn: F) -> F:
    """The seven options, in the order of ``--help``."""
    return stacked(
        priority_option("Its priority among waiting starts: 1 (lowest) to 5 (highest), default 3."),
        click.option(
            "--fairness-key",
            metavar="KEY",
            help="The tenant it is counted for: waiting starts of one priority take turns "
            "between keys.",
        ),
        click.option(
            "--fairness-weight",
            type=click.FloatRange(0.001, 1000),
            metavar="W",
            help="The share of its --fairness-key (0.001 to 1000, default 1).",
        ),
        click.option(
            "--ordering-key",
            metavar="KEY",
            help="Run one at a time, in the order started, with the other starts of this key.",
        ),
        click.option(
            "--debounce-key",
            metavar="KEY",
            help="Start-or-postpone: starts of NAME with this key within --debounce of each "
            "other make one run, with the last start's arguments.",
        ),
        click.option(
            "--debounce",
            callback=_seconds,
            metavar="SECONDS",
            help="With --debounce-key: the quiet period before the run starts, in seconds "
            "(0.5) or as 90s, 15m, 2h.",
        ),
        click.option(
            "--debounce-max-wait",
            callback=_seconds,
            metavar="SECONDS",
            help="With --debounce-key: start at most this long after the burst's first start "
            "(seconds, or 90s, 15m, 2h).",
        ),
    )(fn)


def checked(values: dict[str, Any]) -> dict[str, Any]:
    """The options given (None ones left out), refused with the option's name when one needs
    another (``click.UsageError``: exit 2)."""
    given = {name: values[name] for name in NAMES if values.get(name) is not None}
    if "fairness_weight" in given and "fairness_key" not in given:
        raise click.UsageError("--fairness-weight is the share of a --fairness-key: give one")
    if "debounce_key" in given and "debounce" not in given:
        raise click.UsageError(
            "--debounce-key needs --debounce SECONDS: how long no new start of the key must "
            "come before the run starts"
        )
    for name in ("debounce", "debounce_max_wait"):
        if name in given and "debounce_key" not in given:
            option = "--" + name.replace("_", "-")
            raise click.UsageError(f"{option} needs a --debounce-key (the starts it collapses)")
    wait = given.get("debounce_max_wait")
    if wait is not None and wait < given["debounce"]:
        raise click.UsageError("--debounce-max-wait must be at least --debounce")
    try:  # what execute() checks besides: a key's length and characters, a zero maximum wait
        flow.of_start(
            given.get("priority"), given.get("fairness_key"), given.get("fairness_weight")
        )
        flow_control.check_ordering(given.get("ordering_key"))
        flow_control.check_debounce(given.get("debounce_key"), given.get("debounce"), wait)
    except ValueError as exc:
        raise click.UsageError(_option_names(str(exc))) from None
    return given


def _option_names(message: str) -> str:
    """``execute()``'s message with the option names of the command line."""
    for name in sorted(NAMES, key=len, reverse=True):
        message = re.sub(rf"(?<![\w-]){name}(?![\w-])", f"--{name.replace('_', '-')}", message)
    return message
