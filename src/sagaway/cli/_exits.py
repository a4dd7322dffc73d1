"""The exit codes of ``sagaway`` commands and their help text: importing this loads nothing else
(``sagaway --help`` shows the text without loading a command)."""

from __future__ import annotations

import enum


class Exit(enum.IntEnum):
    """The exit codes of ``sagaway`` commands."""

    OK = 0
    REFUSED = 1
    """The operation is refused: the workflow is in the wrong state, or it failed."""
    USAGE = 2
    """Usage or bad input: options, JSON payloads, database URLs, missing extras."""
    NOT_FOUND = 3
    """Unknown workflow key, or no Sagaway database at the URL."""
    UNREACHABLE = 4
    """The database cannot be reached."""


EXIT_CODES_HELP = (
    "\b\nExit codes:\n"
    "  0  ok\n"
    "  1  operation refused (wrong state: retry of a workflow that is not SUSPENDED,\n"
    "     cancel or terminate of an ended one), or the awaited workflow failed\n"
    "  2  usage or bad input (options, JSON payloads, database URLs, missing extras)\n"
    "  3  not found (unknown workflow key or schedule id, or no Sagaway database at the URL)\n"
    "  4  cannot reach the database"
)
