"""Tracebacks as Python prints them, built cheaply for the usual exception."""

from __future__ import annotations

import linecache
import traceback

_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def _has_group(err: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        if isinstance(current, BaseExceptionGroup):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def format_traceback(err: BaseException) -> str:
    """The traceback as Python prints it, chained exceptions included, without the ``^^^``
    position markers: those make the standard formatter parse the source of every frame, which
    cost more than the rest of a failing activity call (business errors are frequent)."""
    if _has_group(err):
        # Exception groups print as trees; rare enough for the standard formatter.
        return "".join(traceback.format_exception(err))
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = err
    joiner = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append((current, joiner))
        if current.__cause__ is not None:
            current, joiner = current.__cause__, _CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, joiner = current.__context__, _CONTEXT
        else:
            current = None
    parts: list[str] = []
    for exc, joined_by in reversed(chain):
        tb = exc.__traceback__
        if tb is not None:
            parts.append("Traceback (most recent call last):\n")
        while tb is not None:
            frame = tb.tb_frame
            code = frame.f_code
            parts.append(f'  File "{code.co_filename}", line {tb.tb_lineno}, in {code.co_name}\n')
            linecache.lazycache(code.co_filename, frame.f_globals)  # sources in zips, too
            line = linecache.getline(code.co_filename, tb.tb_lineno or 0).strip()
            if line:
                parts.append(f"    {line}\n")
            tb = tb.tb_next
        parts.extend(_exception_only(exc))
        parts.append(joined_by)
    return "".join(parts)


def _exception_only(exc: BaseException) -> list[str]:
    """The last line(s) of a traceback, as ``traceback.format_exception_only`` writes them; built
    directly for the usual exception (the standard formatter's ``TracebackException`` cost as
    much as the rest of a failed attempt's record). The standard formatter still writes those
    it adds to: syntax errors, exceptions with notes, and the name errors that Python 3.12+
    extends with "Did you mean" suggestions."""
    cls = type(exc)
    if issubclass(cls, _STANDARD_FORMAT):
        return traceback.format_exception_only(cls, exc)
    try:
        notes = getattr(exc, "__notes__", None)
    except Exception:
        notes = None  # unreadable notes are left out (the standard formatter raises, or says so)
    if notes is not None:
        return traceback.format_exception_only(cls, exc)
    name, module = cls.__qualname__, cls.__module__
    if module not in ("__main__", "builtins"):
        name = f"{module if isinstance(module, str) else '<unknown>'}.{name}"
    try:
        text = str(exc)
    except BaseException:  # as the standard formatter: any failure of __str__ is reported
        text = "<exception str() failed>"
    return [f"{name}: {text}\n" if text else f"{name}\n"]


_STANDARD_FORMAT = (SyntaxError, NameError, AttributeError, ImportError)
