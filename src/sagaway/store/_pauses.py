"""Pauses, shared by both SQL stores: the statements' parameters and what a resumed activity
or queue wakes (the WAITING reason of a workflow held back by it)."""

from __future__ import annotations

from typing import Any

KINDS = ("activity", "queue")
"""What ``pause_calls`` pauses: an activity by its registered name, or an activity queue."""


def waiting_for(kind: str, name: str) -> str:
    """What a workflow held back by the paused activity or queue ``name`` is WAITING for."""
    return f"paused:{kind}:{name}"


def workflow_params(run_id: str, now: float) -> dict[str, Any]:
    return {"run_id": run_id, "now": now}


def calls_params(kind: str, name: str, reason: str, now: float) -> dict[str, Any]:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    return {
        "kind": kind,
        "name": name,
        "reason": reason,
        "now": now,
        "waiting_for": waiting_for(kind, name),
    }
