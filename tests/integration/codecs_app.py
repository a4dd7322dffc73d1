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


V1_KEY = bytes(range(32))
"""The key of the rows below, sealed by Sagaway before payloads were bound to their place
(commit 880b8da, ``Chain([Compress(), Encrypt(keys=[V1_KEY])]).seal(text)``): what a database
written by that version holds (envelope v1)."""
V1_ARGS = (
    '{"$sagaway_codec":"aesgcm:9f9b2597c05f","data":"4VPaMrrNs2Ryz7aT+0fkrITfXmVmrnC+R3YjPS2q'
    '1S9+aA4MLUZDF1o/WoJ3c3RPmrP+dMPAGUma"}'
)
"""``{"payee": "BOB", "amount": 5}``."""
V1_QUOTE = (
    '{"$sagaway_codec":"aesgcm:9f9b2597c05f","data":"r5BdHr87kWcWDZ+/cDSNbFTV6USF9GBskEDAu7tK'
    'xb006/3boK5Zn5a6OgtR2SnVMO6+N3H0"}'
)
"""``{"payee": "BOB", "fee": 3}``."""
V1_COMPRESSED = (
    '{"$sagaway_codec":"zlib,aesgcm:9f9b2597c05f","data":"cn45BdWFWqMjmGSuP3MP0piLcBCxW5ka4uYO'
    'umggE5Jwv/HV13XVBRx0"}'
)
"""``json.dumps("x" * 300)``, compressed then encrypted."""

TRANSFERS: list[tuple[str, int]] = []
"""Every transfer the ``bank.transfer`` activity made, in order (payee, amount)."""


def bank(url: str, codec: Any | Sequence[Any] | None) -> sw.Manager:
    """``bank.pay(payee, amount)``: step 1 quotes the payee, step 2 quotes it again (so that a
    run has two activity results), step 3 waits for an ``approve`` signal, step 4 transfers
    the amount of its arguments."""
    m = sw.Manager(url, codec=codec, poll_interval=0.05, recovery_interval=0.2)

    @m.register_activity(name="bank.quote")
    async def quote(payee: str) -> dict[str, Any]:
        return {"payee": payee, "fee": len(payee)}

    @m.register_activity(name="bank.transfer")
    async def transfer(payee: str, amount: int) -> str:
        TRANSFERS.append((payee, amount))
        return f"sent {amount} to {payee}"

    @m.register_workflow(name="bank.pay")
    async def pay(payee: str, amount: int) -> str:
        first = await quote(payee)
        second = await quote(f"{payee} (again)")
        note = await m.signal("approve").receive(str)
        done = await transfer(payee, amount)
        return f"{done} (quoted {first['payee']}, fee {second['fee']}): {note}"

    return m
