"""Options several commands take, each written once: a number with a floor (seconds, counts,
positions), ``--utc``, ``--json``, ``--limit``, ``--yes``, and a ``--reason`` that says by
default where the action came from.

(``--db``, ``--reason`` without a default and the key and file options are in ``_support``.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]
F = TypeVar("F", bound=Callable[..., Any])


def number_option(
    *decls: str,
    default: float | None,
    minimum: float,
    help: str,
    metavar: str | None = None,
    show_default: bool = True,
) -> Decorator:
    """An option taking a number at least ``minimum``: whole when ``default`` is an ``int``
    (``IntRange``), else a float (``FloatRange``)."""
    kind = click.IntRange if isinstance(default, int) else click.FloatRange
    return click.option(
        *decls,
        type=kind(min=minimum),
        default=default,
        show_default=show_default,
        metavar=metavar,
        help=help,
    )


def seconds_option(*decls: str, default: float, minimum: float, help: str) -> Decorator:
    """A duration in seconds (``SECONDS``, its default shown)."""
    return number_option(*decls, default=default, minimum=minimum, help=help, metavar="SECONDS")


def position_option(name: str, metavar: str, help: str) -> Decorator:
    """Where reading starts: a whole number from 0 (the default: the beginning)."""
    return number_option(name, default=0, minimum=0, help=help, metavar=metavar, show_default=False)


def limit_option(help: str) -> Decorator:
    """``--limit N``: the size of a page (50 unless given)."""
    return number_option("--limit", default=50, minimum=1, help=help)


utc_option = click.option(
    "--utc", is_flag=True, help="Times in UTC (default: local time, offset shown)."
)
"""``--utc``: the reading commands write times in UTC, not the local zone."""


def json_option(help: str = "Print one JSON array.", dest: str = "as_json") -> Decorator:
    """``--json`` (the parameter ``dest``)."""
    return click.option("--json", dest, is_flag=True, help=help)


yes_option = click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
"""``--yes``: go ahead without the question (``_support.confirm``)."""


def stated_reason_option(done: str, help: str | None = None) -> Decorator:
    """``--reason`` of an action whose reason is also its message: by default ``<done> from the
    command line``."""
    return click.option(
        "--reason", default=f"{done} from the command line", show_default=True, help=help
    )


name_option = click.option("--name", help="Only workflows of this registered name.")
"""``--name``: the workflow filter of ``list`` and ``batch``."""

key_prefix_option = click.option("--key-prefix", help="Only keys that start with this.")
"""``--key-prefix``: the workflow filter of ``list`` and ``batch``."""


def stacked(*options: Decorator) -> Callable[[F], F]:
    """One decorator of several options, listed in the order ``--help`` shows them."""

    def decorate(fn: F) -> F:
        decorated: Callable[..., Any] = fn
        for option in reversed(options):
            decorated = option(decorated)
        return decorated  # type: ignore[return-value]  # click returns the function it got

    return decorate


def priority_option(help: str) -> Decorator:
    """``--priority 1..5`` (1 lowest, 5 highest)."""
    return click.option("--priority", type=click.IntRange(1, 5), metavar="1..5", help=help)


def old_name_option(old: str, new: str, type: Any = None) -> Decorator:
    """``old``, the hidden former name of option ``new`` (the command warns when it is used)."""
    return click.option(old, type=type, hidden=True, help=f"Deprecated: the old name of {new}.")
