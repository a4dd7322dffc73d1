"""Structured logs: every record made inside a workflow or activity carries where it came from.

``ContextFilter`` adds ``workflow_key``, ``run_id``, ``step`` (the call id), ``activity`` and
``attempt`` to each record it sees (None outside a workflow), whoever logged it: the engine,
or the application's own ``logging`` calls in workflow and activity code. ``JsonFormatter``
writes one JSON object per line with those fields. ``configure_logging`` puts both on a handler
(``sagaway worker --log-format json`` uses it).
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import IO, Any

from sagaway import activity
from sagaway._engine.executor import current_execution

FIELDS = ("workflow_key", "run_id", "step", "activity", "attempt")
"""The fields ``ContextFilter`` adds to each record."""

# Attributes every LogRecord has: what is left over was passed in ``extra``.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class ContextFilter(logging.Filter):
    """Adds the workflow and activity a record was made in (see the module docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        info = activity.current()
        if info is not None:
            record.workflow_key = info.workflow_key
            record.run_id = info.run_id
            record.step = info.call_id
            record.activity = info.activity_name
            record.attempt = info.attempt
            return True
        execution = current_execution()
        if execution is not None:
            record.workflow_key = execution.key
            record.run_id = execution.record.run_id
        else:
            # The engine names the workflow of records it makes outside one (``workflow_id``).
            record.workflow_key = getattr(record, "workflow_id", None)
            record.run_id = None
        record.step = None
        record.activity = None
        record.attempt = None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``time`` (ISO 8601, UTC), ``level``, ``logger``,
    ``message``, the context fields, whatever was passed in ``extra``, and ``exception``."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in record.__dict__.items():
            if name not in _STANDARD and name != "workflow_id" and value is not None:
                out[name] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message``, then ``[workflow KEY step N]`` when there is one."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        key = getattr(record, "workflow_key", None)
        if key is None:
            return text
        step = getattr(record, "step", None)
        where = f"workflow {key}" if step is None else f"workflow {key} step {step}"
        head, sep, tail = text.partition("\n")  # after the message, before a traceback
        return f"{head} [{where}]{sep}{tail}"


def configure_logging(
    level: int | str = logging.INFO, *, json_lines: bool = True, stream: IO[str] | None = None
) -> logging.Handler:
    """Log to ``stream`` (stderr) through ``ContextFilter``, as JSON lines or as text with the
    workflow key; returns the handler added to the root logger."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter() if json_lines else TextFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    return handler
