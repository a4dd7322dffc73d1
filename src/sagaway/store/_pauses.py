"""Pauses, shared by both SQL stores: the statements' parameters, what a resumed activity or
queue wakes (the WAITING reason of a workflow held back by it), and the pause verbs written
once (``SQLPauses``) over two hooks each dialect gives: its transaction and its read."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Collection, Sequence
from typing import Any

from sagaway.store.forwarding import derived
from sagaway.store.pause_verbs import PauseVerbs
from sagaway.store.records import AuditNote, PausedCallRecord

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


@dataclasses.dataclass(frozen=True)
class Change:
    """A pause or a resume, one transaction: the named statement ``query``; if it changed a
    row, the named statement ``then`` (if any) and the ``audit`` entry (``about``: its
    ``run_id`` or ``target``)."""

    query: str
    params: dict[str, Any]
    then: str | None
    audit: AuditNote | None
    about: dict[str, str]


class SQLPauses(abc.ABC):
    """The pause verbs of both SQL stores (see ``store.pause_verbs``); a dialect's collaborator
    subclasses it with the two hooks."""

    @abc.abstractmethod
    async def _change(self, change: Change) -> bool:
        """Make ``change`` in one transaction; whether its statement changed a row."""

    @abc.abstractmethod
    async def _rows(self, query: str, run_ids: Collection[str] | None) -> Sequence[Any]:
        """The rows of the named read ``query``, given the ``run_ids`` parameter (if any)."""

    async def _pause_workflow(self, values: dict[str, Any]) -> bool:
        run_id = values["run_id"]
        query = "pause_workflow" if values["paused"] else "resume_workflow"
        params = workflow_params(run_id, values["now"])
        return await self._change(Change(query, params, None, values["audit"], {"run_id": run_id}))

    pause_workflow = derived(PauseVerbs.pause_workflow, _pause_workflow)

    async def paused_runs(self, run_ids: Collection[str]) -> set[str]:
        return {row[0] for row in await self._rows("paused_runs", run_ids)}

    async def _pause_calls(self, values: dict[str, Any]) -> bool:
        kind, name = values["kind"], values["name"]
        params = calls_params(kind, name, values["reason"], values["now"])
        paused = values["paused"]
        query, then = ("pause_calls", None) if paused else ("resume_calls", "wake_paused_calls")
        about = {"target": f"{kind}:{name}"}
        return await self._change(Change(query, params, then, values["audit"], about))

    pause_calls = derived(PauseVerbs.pause_calls, _pause_calls)

    async def list_paused_calls(self) -> list[PausedCallRecord]:
        rows = await self._rows("list_paused_calls", None)
        return [PausedCallRecord(k, n, r, float(at)) for k, n, r, at in rows]
