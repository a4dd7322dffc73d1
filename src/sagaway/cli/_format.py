"""How the reading commands (``list``, ``show``) write times, durations and statuses, and read
the times an operator types.

Times are shown in the local zone with its offset (``2026-12-01 10:31:02.123 +01:00``), or in
UTC with ``--utc``: an operator comparing with logs of another machine sees which zone is meant.
JSON carries each time twice: epoch seconds (the field's plain name, as before) and ISO 8601
with the offset (``<field>_iso``).

Text that comes from the database (keys, names, error messages, tracebacks) reaches the terminal
through ``safe`` (one line: every control character shown as ``\x1b``, ``\r``, ``\n``...),
``safe_lines`` (several lines: line breaks kept, every other control shown) or ``escape``
(``safe`` and rich markup escaped): an ESC, CR or OSC sequence in a stored row cannot clear the
screen, overwrite a row or plant a hyperlink. JSON output escapes them by itself.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich import markup
from rich.text import Text

from sagaway import _human, identifiers
from sagaway._human import duration as duration  # re-exported: the CLI writes _format.duration

T = TypeVar("T")

STATUS_STYLE = {
    "COMPLETED": "green",
    "FAILED": "red",
    "SUSPENDED": "yellow",
    "RUNNING": "cyan",
    "PENDING": "cyan",
    "WAITING": "blue",
    "CANCELLED": "magenta",
    "TERMINATED": "magenta",
    "RETRYING": "yellow",
    "ERROR": "red",
    "pending": "cyan",
    "delivered": "green",
    "rejected": "red",
}


_ONE_LINE = identifiers.ESCAPES
_LINES = {c: text for c, text in _ONE_LINE.items() if c != 0x0A}


def safe(text: str) -> str:
    """``text`` with every C0/C1 control character (and DEL) written as its escape: one line,
    nothing the terminal would act on."""
    return text.translate(_ONE_LINE)


def safe_lines(text: str) -> str:
    """``text`` with its line breaks kept and every other control character escaped (CR
    included: it would overwrite the start of the line)."""
    return text.translate(_LINES)


def escape(text: str) -> str:
    """``safe(text)`` for rich markup: brackets escaped too."""
    return markup.escape(safe(text))


def styled(status: str) -> str:
    """``status`` in its colour (rich markup)."""
    style = STATUS_STYLE.get(status, "")
    return f"[{style}]{status}[/{style}]" if style else status


def status_text(status: str) -> Text:
    """``status`` in its colour (a cell of ``_table.PlainTable``)."""
    return Text(status, style=STATUS_STYLE.get(status, ""))


class Clock:
    """Writes times in one zone: local (default) or UTC."""

    def __init__(self, utc: bool) -> None:
        self.utc = utc

    def _dt(self, value: float) -> datetime.datetime:
        if self.utc:
            return datetime.datetime.fromtimestamp(value, tz=datetime.UTC)
        return datetime.datetime.fromtimestamp(value).astimezone()

    def text(self, value: float | None) -> str:
        """``2026-12-01 10:31:02.123 +01:00`` (``... UTC`` with --utc); ``-`` for none."""
        if value is None:
            return "-"
        dt = self._dt(value)
        zone = "UTC" if self.utc else dt.isoformat()[-6:]
        return f"{dt:%Y-%m-%d %H:%M:%S}.{dt.microsecond // 1000:03d} {zone}"

    def iso(self, value: float | None) -> str | None:
        """ISO 8601 with the zone's offset, to the microsecond."""
        return None if value is None else self._dt(value).isoformat(timespec="microseconds")

    def fields(self, **times: float | None) -> dict[str, Any]:
        """JSON fields: each time as epoch seconds under its name and ISO 8601 as ``<name>_iso``."""
        out: dict[str, Any] = {}
        for name, value in times.items():
            out[name] = value
            out[f"{name}_iso"] = self.iso(value)
        return out

    def record(self, obj: object, names: str) -> dict[str, Any]:
        """JSON of ``obj``'s attributes ``names`` (separated by spaces), in that order; a time
        (``at`` or ``*_at``) as its two ``fields``."""
        out: dict[str, Any] = {}
        for name in names.split():
            value = getattr(obj, name)
            if name == "at" or name.endswith("_at"):
                out.update(self.fields(**{name: value}))
            else:
                out[name] = value
        return out


def parse_time(value: str, *, utc: bool, option: str, now: float | None = None) -> float:
    """Epoch seconds of what an operator typed (``_human.moment``): an ISO 8601 date or
    date-time (without an offset: in the local zone, or UTC with --utc) or a duration ago."""
    try:
        return _human.moment(value, utc=utc, now=now)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is neither an ISO 8601 date/time (2026-12-01, 2026-12-01T10:30, "
            "2026-12-01T10:30+01:00) nor a duration ago (90s, 15m, 2h, 3d, 1w)",
            param_hint=option,
        ) from None


def time_bounds(since: str | None, until: str | None, *, utc: bool) -> dict[str, float]:
    """``--since``/``--until`` as given, read (``parse_time``): ``{"since": …, "until": …}``."""
    return {
        option: parse_time(value, utc=utc, option=f"--{option}")
        for option, value in (("since", since), ("until", until))
        if value is not None
    }


def print_page(
    rows: list[T],
    limit: int,
    show: Callable[[list[T]], None],
    next_page: Callable[[T], str],
    to_stderr: bool,
) -> None:
    """``show`` up to ``limit`` of ``rows`` (one more was read: is there a next page?), then
    the option that shows the next page (on stderr when stdout must stay one JSON document)."""
    show(rows[:limit])
    if len(rows) > limit:
        click.echo(f"next page: {next_page(rows[limit - 1])}", err=to_stderr)


def clip(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters; --json shows all)"
