"""Errors as recorded: the JSON description of a failure, domain errors through an
``ErrorMarshaler``, and the records read back (rebuilt, or summarised for ``describe()``)."""

from __future__ import annotations

import base64
import json
from typing import Any, Protocol, runtime_checkable

import pydantic_core

from sagaway import _sealed, errors
from sagaway.errors import error_record
from sagaway.serialization._tracebacks import format_traceback
from sagaway.states import ErrorKind


@runtime_checkable
class ErrorMarshaler(Protocol):
    """Lets domain error types cross the database boundary."""

    def marshal_completable_error(self, err: BaseException) -> bytes | None:
        """Bytes for a completable error, or None when ``err`` is not completable."""
        ...

    def unmarshal_completable_error(self, data: bytes) -> BaseException:
        """Rebuild the error from what ``marshal_completable_error`` produced."""
        ...


def _all_subclasses(cls: type[BaseException]) -> list[type[BaseException]]:
    out: list[type[BaseException]] = []
    stack = [cls]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(current.__subclasses__())
    return out


class DefaultErrorMarshaler:
    """Marshals ``CompletableError`` and its subclasses as JSON.

    Unmarshalling rebuilds the same class only if it is already imported (classes are matched by
    module and qualified name; nothing is imported or evaluated from stored data). Otherwise it
    returns a plain ``CompletableError`` carrying the message, code and details, with
    ``original_type`` naming the class that was recorded.
    """

    def marshal_completable_error(self, err: BaseException) -> bytes | None:
        if not isinstance(err, errors.CompletableError):
            return None
        cls = type(err)
        payload = {
            "type": f"{cls.__module__}:{cls.__qualname__}",
            "message": err.message,
            "code": err.code,
            "details": err.details,
        }
        try:
            return pydantic_core.to_json(payload, fallback=str)
        except ValueError:
            # Text that is not valid Unicode (a lone surrogate in the message): the standard
            # encoder escapes it, and json.loads gives the same string back.
            return json.dumps(payload, default=str).encode()

    def unmarshal_completable_error(self, data: bytes) -> BaseException:
        payload = json.loads(data)
        type_name = str(payload.get("type", ""))
        message = str(payload.get("message", ""))
        code = payload.get("code")
        details = payload.get("details") or {}
        for cls in _all_subclasses(errors.CompletableError):
            if f"{cls.__module__}:{cls.__qualname__}" == type_name:
                err = cls.__new__(cls)
                Exception.__init__(err, message)
                assert isinstance(err, errors.CompletableError)
                err.message, err.code, err.details = message, code, dict(details)
                return err
        fallback = errors.CompletableError(message, code, **details)
        fallback.original_type = type_name  # type: ignore[attr-defined]
        return fallback


def describe_error(
    err: BaseException,
    kind: ErrorKind,
    marshaler: ErrorMarshaler | None = None,
    *,
    limit: int = 8000,
) -> str:
    """JSON description of an error as recorded in the database."""
    cls = type(err)
    extra: dict[str, str] = {}
    if marshaler is not None:
        data = marshaler.marshal_completable_error(err)
        if data is not None:
            extra["marshaled"] = base64.b64encode(data).decode()
    extra["traceback"] = format_traceback(err)[-limit:]
    return error_record(kind, f"{cls.__module__}.{cls.__qualname__}", str(err), **extra)


def error_from_record(text: str, marshaler: ErrorMarshaler) -> BaseException:
    """Rebuild a recorded completable error."""
    if text.startswith(_sealed.SEALED_PREFIX):
        raise _sealed.sealed_error(text, "error record")
    record = _error_record(text)
    if record is None:
        raise errors.PayloadError(
            f"the recorded error is not the JSON Sagaway writes ({text[:200]!r}); the row was "
            "altered outside Sagaway: repair it, or start the workflow anew"
        )
    data = record.get("marshaled")
    if data is not None:
        try:
            raw = base64.b64decode(data, validate=True)
        except (ValueError, TypeError):
            raise errors.PayloadError(
                f"the recorded error's marshaled data is not base64 ({str(data)[:200]!r}); the "
                "row was altered outside Sagaway"
            ) from None
        return marshaler.unmarshal_completable_error(raw)
    if record.get("kind") == ErrorKind.CANCELLED:
        return errors.WorkflowCancelled("", "CANCELLED", str(record.get("message", "")))
    return errors.CompletableError(str(record.get("message", "")))


def _error_record(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def error_summary(text: str | None) -> dict[str, Any] | None:
    """The recorded error as a dict (for describe()).

    A record that is not Sagaway's JSON (altered outside it) is described, not raised: one bad
    row must not stop ``describe()`` or ``sagaway show`` from printing the rest.
    """
    if text is None:
        return None
    if text.startswith(_sealed.SEALED_PREFIX):
        return {
            "kind": ErrorKind.UNREADABLE.value,
            "type": _sealed.SEALED_MARKER,
            "message": _sealed.note(text),
        }
    data = _error_record(text)
    if data is None:
        return {
            "kind": ErrorKind.UNREADABLE.value,
            "type": "sagaway.CorruptRecord",
            "message": f"the recorded error is not valid Sagaway JSON: {text[:200]!r}",
        }
    return data


ROUND_FIELD = "round"
"""A RETRYING step's error record: the attempts of the retry policy's current round made so
far, so a run that replays the call between two attempts (unloaded while it waited for a
queue's slot, or taken over after a crash) goes on with that round instead of a new one."""


def with_round(text: str, tries: int) -> str:
    """The error record ``text`` with the round's attempts so far."""
    record = _error_record(text)
    if record is None:
        return text
    record[ROUND_FIELD] = tries
    return json.dumps(record)


def round_of(text: str | None) -> int:
    """The round's attempts an error record says were made (0: none said, or not readable)."""
    record = _error_record(text) if text else None
    tries = record.get(ROUND_FIELD) if record else None
    return tries if isinstance(tries, int) and not isinstance(tries, bool) and tries > 0 else 0
