"""What became of a signal ``sagaway signal`` sent, when the workflow was waiting for it.

A signal's payload is checked against the receiver's type when the workflow receives it, in
the worker that runs it, not when it is sent. When the workflow is waiting for that very
signal, a worker takes it up at once, so the command can wait briefly and say whether it was
delivered or rejected (and why). Otherwise (not waiting for it yet, or no worker running) it
says that the signal was stored and where to look later.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import sagaway as sw

POLL_INTERVAL = 0.1
"""Seconds between two looks at the signal while waiting for its delivery."""


@dataclasses.dataclass(frozen=True, slots=True)
class Sent:
    """The outcome of a send."""

    stored: bool
    """False: a signal with this dedupe id was sent before (nothing new stored)."""
    awaited: bool
    """The workflow was waiting for a signal of this name when it was sent."""
    signal: sw.SignalDescription | None = None
    """The signal as last seen (None: not looked for, or not found)."""
    waits_for: str | None = None
    """The name of the signal the workflow was waiting for when this one was sent (None: it
    was not waiting for a signal)."""


async def send(
    manager: sw.Manager,
    key: str,
    name: str,
    data: Any,
    dedupe_id: str | None,
    wait: float,
    reason: str | None = None,
) -> Sent:
    """Send the signal; if the workflow awaited it, watch it for up to ``wait`` seconds, until
    it is no longer pending."""
    handle = manager.get_workflow(key)
    before = await handle.describe()
    waits_for = waiting_for_signal(before)
    awaited = waits_for == name
    seen = max((s.id for s in before.signals), default=0)
    stored = await manager.signal(name).send(key, data, dedupe_id=dedupe_id, reason=reason)
    if not stored or not awaited or wait <= 0:
        return Sent(stored, awaited, waits_for=waits_for)
    deadline = time.monotonic() + wait
    while True:
        mine = _find(await handle.describe(), seen, name, data, dedupe_id)
        if mine is None or mine.state != "pending" or time.monotonic() >= deadline:
            return Sent(stored, awaited, mine, waits_for)
        await asyncio.sleep(POLL_INTERVAL)


def waiting_for_signal(d: sw.WorkflowDescription) -> str | None:
    """The name of the signal the workflow waits for: WAITING on it, or (held by a worker
    meanwhile) with a receive of it as its latest step still waiting; None otherwise."""
    if d.waiting_for is not None:
        kind, _, name = d.waiting_for.partition(":")
        return name if kind == "signal" else None
    if d.status.ended or not d.steps:
        return None
    last = max(d.steps, key=lambda s: s.started_at)
    if last.kind is sw.StepKind.SIGNAL and last.status is sw.StepStatus.WAITING:
        return last.name
    return None


def _find(
    d: sw.WorkflowDescription, seen: int, name: str, data: Any, dedupe_id: str | None
) -> sw.SignalDescription | None:
    """The signal this command stored: the first of its name, dedupe id and payload stored
    after the ones seen before sending (another sender's signal differs in one of these, or
    was sent the same instant with the same payload, which makes no difference)."""
    for s in d.signals:
        if s.id > seen and s.name == name and s.dedupe_id == dedupe_id and s.payload == data:
            return s
    return None
