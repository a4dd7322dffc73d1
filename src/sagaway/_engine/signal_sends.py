"""Sending a signal to a workflow: checked, encoded, stored once per ``dedupe_id``, announced."""

from __future__ import annotations

from typing import Any, Protocol

from sagaway import errors, events, serialization
from sagaway._engine.text_checks import check_name, check_text
from sagaway.channel import Channel
from sagaway.clock import Clock
from sagaway.store.base import Store
from sagaway.store.records import AuditNote


class Engine(Protocol):
    """What a send uses of the Engine (``Engine.send_signal`` calls it)."""

    store: Store
    clock: Clock
    channel: Channel
    payload_limit: int

    def wake_recovery(self) -> None: ...


async def send_signal(
    engine: Engine,
    key: str,
    name: str,
    payload: Any,
    dedupe_id: str | None,
    audit_note: AuditNote | None = None,
) -> bool:
    """Store a signal for the workflow under ``key``; False if ``dedupe_id`` was seen.
    ``audit_note``: an operator's signal, recorded if stored."""
    # Checked here, before the database: PostgreSQL refuses NUL in text with a raw
    # DataError (SQLite stores it), and neither can store a lone surrogate.
    check_name(name, "signal name")
    if dedupe_id is not None:
        check_text(dedupe_id, "dedupe_id")
    data = serialization.encode_value(payload, f"payload of signal {name!r}", engine.payload_limit)
    record, stored = await engine.store.send_signal(
        key,
        name=name,
        payload=data,
        dedupe_id=dedupe_id,
        now=engine.clock.now(),
        audit=audit_note,
    )
    if record is None:
        raise errors.WorkflowNotFound(key)
    if record.status.ended and not stored:
        if dedupe_id is not None and await _signal_seen(engine, record.run_id, name, dedupe_id):
            return False  # a repeat of a send that was delivered before the end
        raise errors.SagawayError(
            f"workflow {key!r} has ended ({record.status.value}); signal {name!r} was not delivered"
        )
    if stored:
        engine.channel.publish(events.SignalSent(record.run_id, key, name))
        engine.wake_recovery()
    return stored


async def _signal_seen(engine: Engine, run_id: str, name: str, dedupe_id: str) -> bool:
    """Whether ``run_id`` holds signal ``name`` sent with ``dedupe_id``: read only when a
    send finds the execution ended, so a retried callback is told "already sent"."""
    signals = await engine.store.list_signals(run_id)
    return any(s.name == name and s.dedupe_id == dedupe_id for s in signals)
