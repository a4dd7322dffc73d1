"""The Engine Server's refusals (a status code, its message and the trailing metadata
``sagaway-error`` ...) turned back into the errors the server's store raised, for the client
(``store/remote/client.py``): a lease lost, a pending cancel, an unreadable row, an outage."""

from __future__ import annotations

import json
from typing import Any

import grpc

from sagaway import errors
from sagaway.store.contract import (
    CancelPending,
    DatabaseNotFound,
    PermissionDenied,
    StoreUnavailable,
)
from sagaway.store.remote.target import Target

CODES = {code.value[0]: code for code in grpc.StatusCode}
"""Status codes by number (a Batch result carries the number)."""


class ServerRefused(errors.SagawayError):
    """The Engine Server refused this client: no or wrong token, or another protocol version."""


def _corrupt(trailing: dict[str, Any], details: str) -> errors.CorruptRecord:
    """The server's CorruptRecord, rebuilt from its trailing metadata."""
    try:
        row = json.loads(trailing["sagaway-corrupt-bin"])
        what, field, value = str(row["what"]), str(row["field"]), row["value"]
    except (KeyError, TypeError, ValueError):
        return errors.CorruptRecord("a row", "?", details)
    _, _, hint = details.partition("cannot read; ")
    return errors.CorruptRecord(what, field, value, hint)


def _run_id(trailing: dict[str, Any]) -> str:
    raw = trailing.get("sagaway-run-id-bin", b"")
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def error_of(
    code: grpc.StatusCode, details: str, trailing: dict[str, Any], *, url: str, target: Target
) -> Exception:
    """The exception a refused call raises on the client."""
    kind = str(trailing.get("sagaway-error", ""))
    where = f"the Engine Server at {target.address}"
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return StoreUnavailable(f"cannot reach {where}: {details}")
    if kind == "LeaseLost":
        return errors.LeaseLost(_run_id(trailing), details.removeprefix("lease lost: "))
    if kind == "CancelPending":
        return CancelPending(_run_id(trailing), details)
    if kind == "CorruptRecord":
        return _corrupt(trailing, details)
    if kind == "DatabaseNotFound":
        return DatabaseNotFound(url, details)
    if code is grpc.StatusCode.UNAUTHENTICATED:
        hint = (
            "the one this client sends (token=, else $SAGAWAY_TOKEN) is not the server's"
            if target.token
            else "this client has no token: pass token= to the Manager or set SAGAWAY_TOKEN"
        )
        return ServerRefused(f"{where} refused the call: {details}; {hint}")
    if code is grpc.StatusCode.PERMISSION_DENIED:
        return PermissionDenied(f"{where} refused the call: {details}")
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        return ValueError(details)
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return errors.PayloadError(f"{where} refused a message: {details}")
    if code is grpc.StatusCode.FAILED_PRECONDITION and kind == "ProtocolVersion":
        return ServerRefused(details)
    return errors.SagawayError(f"{where} failed ({code.name}): {details}")


def check_fork_size(request: Any, largest: int, source_run_id: str) -> None:
    """Refuse a fork request larger than the server takes (0: no limit known). The payloads
    sealed again for the fork travel in this one request (one transaction): the server would
    refuse it unread, with a message that says less."""
    if largest and request.ByteSize() > largest:
        raise errors.PayloadError(
            f"a fork of run {source_run_id} carries {request.ByteSize()} bytes of payloads, "
            f"more than the Engine Server takes in one request ({largest}): fork it from a "
            "process connected to the database, or raise the server's payload limit"
        )
