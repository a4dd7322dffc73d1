"""Exceptions to gRPC status codes: the one mapping of the server. No stack trace leaves it;
an unexpected error is logged here and reported as INTERNAL."""

from __future__ import annotations

import json
import logging
import sqlite3

import grpc

from sagaway import errors
from sagaway.store import DatabaseNotFound, StoreUnavailable
from sagaway.store.base import CancelPending

logger = logging.getLogger("sagaway.server")
RUN_ID_KEY = "sagaway-run-id-bin"
"""Trailing metadata of a LeaseLost refusal: the run id (UTF-8)."""
CORRUPT_KEY = "sagaway-corrupt-bin"
"""Trailing metadata of a CorruptRecord refusal: JSON of the row's what, field and value."""
LEASE_LOST = "lease lost"
"""How the message of a fenced call refused for its lease starts (the protocol says so)."""


class Refusal(Exception):
    """A request the server refuses, with its status code and the ``sagaway-error`` kind."""

    def __init__(self, code: grpc.StatusCode, message: str, kind: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.kind = kind


def _is_data_error(exc: BaseException) -> bool:
    # psycopg is optional: recognise its DataError by name (bad text or numbers for a column).
    names = {cls.__name__ for cls in type(exc).__mro__}
    return "DataError" in names and type(exc).__module__.startswith("psycopg")


def status_of(
    exc: BaseException, method: str
) -> tuple[grpc.StatusCode, str, tuple[tuple[str, str | bytes], ...]]:
    """The status code, message and trailing metadata that report ``exc``."""
    kind = type(exc).__name__
    extra: tuple[tuple[str, str | bytes], ...] = ()
    if isinstance(exc, Refusal):
        code, kind = exc.code, exc.kind or kind
    elif isinstance(exc, errors.LeaseLost):
        code = grpc.StatusCode.FAILED_PRECONDITION
        # Binary metadata: a run id from the request may hold any text, a plain header not.
        extra = ((RUN_ID_KEY, exc.run_id.encode("utf-8", "surrogatepass")),)
    elif isinstance(exc, CancelPending):
        code = grpc.StatusCode.FAILED_PRECONDITION
        extra = ((RUN_ID_KEY, exc.run_id.encode("utf-8", "surrogatepass")),)
    elif isinstance(exc, errors.CorruptRecord):
        # One unreadable row: the client names it as an embedded store would.
        code = grpc.StatusCode.DATA_LOSS
        row = {"what": exc.what, "field": exc.field, "value": exc.value}
        extra = ((CORRUPT_KEY, json.dumps(row, default=str).encode()),)
    elif isinstance(exc, StoreUnavailable):
        code = grpc.StatusCode.UNAVAILABLE
    elif isinstance(exc, (errors.WorkflowNotFound, DatabaseNotFound)):
        code = grpc.StatusCode.NOT_FOUND
    elif isinstance(exc, (errors.WorkflowAlreadyExists, errors.IdempotencyConflict)):
        code = grpc.StatusCode.ALREADY_EXISTS
    elif isinstance(exc, errors.PayloadError):
        code = grpc.StatusCode.RESOURCE_EXHAUSTED
    elif isinstance(exc, (ValueError, TypeError)) or _is_data_error(exc):
        code = grpc.StatusCode.INVALID_ARGUMENT
    elif isinstance(exc, RecursionError):
        # A payload nested deeper than the interpreter's recursion limit (json reads it
        # recursively): the request's fault, not the server's.
        message = "a value in the request nests too deeply to be read"
        return grpc.StatusCode.INVALID_ARGUMENT, message, (("sagaway-error", kind),)
    elif isinstance(exc, sqlite3.OperationalError):
        code = grpc.StatusCode.UNAVAILABLE
    else:
        logger.exception("%s failed", method, exc_info=exc)
        return (
            grpc.StatusCode.INTERNAL,
            "internal error (the server's log has it)",
            (("sagaway-error", "Internal"),),
        )
    message = " ".join(str(exc).split()) or kind
    if isinstance(exc, errors.LeaseLost) and not message.startswith(LEASE_LOST):
        message = f"{LEASE_LOST}: {message}"  # the protocol's mark, for clients without the SDK
    return code, message, (("sagaway-error", kind), *extra)
