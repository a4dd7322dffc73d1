"""Workflows that carry a marker string everywhere a payload goes (inputs, outputs, an
attempt's error, a completable error, a signal, a child's result), for the codec tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sagaway as sw

MARK = "PII-Jane-Doe-4711"
"""Plaintext that must never reach the database while a codec encrypts."""

FAST = sw.RetryPolicy(initial_interval=0.01, maximum_interval=0.01, maximum_attempts=5)


def build(url: str, codec: Any | Sequence[Any] | None) -> sw.Manager:
    m = sw.Manager(url, codec=codec, poll_interval=0.05, recovery_interval=0.2)
    failed_once: set[str] = set()

    @m.register_activity(retry=FAST, name="kyc.check")
    async def check(person: str) -> dict[str, str]:
        if person not in failed_once:
            failed_once.add(person)
            raise RuntimeError(f"registry timeout for {person}")  # an attempt's error
        return {"verified": person}

    @m.register_workflow(name="kyc.child")
    async def child(person: str) -> str:
        return f"child saw {person}"

    @m.register_workflow(name="kyc.refuse")
    async def refuse(person: str) -> str:
        raise sw.CompletableError(f"refused {person}", code="kyc")

    @m.register_workflow(name="kyc.parent")
    async def parent(person: str) -> str:
        checked = await check(person)
        seen = await m.workflow(child, person).execute_get()
        try:
            await m.workflow(refuse, person).execute_get()
            refused = "?"
        except sw.CompletableError as exc:
            refused = exc.message
        note = await m.signal("approve").receive(str)
        return f"{checked['verified']}|{seen}|{refused}|{note}"

    @m.register_workflow(name="kyc.wait")
    async def wait(person: str) -> str:
        note = await m.signal("approve").receive(str)
        return f"{person} approved: {note}"

    return m
