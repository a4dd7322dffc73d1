"""One order workflow as several deploys of its code, for the patching tests (and ``sagaway
replay``).

``build(url, code, ledger)`` registers workflow ``order`` as that deploy's code:

- ``v1``: reserve, charge, wait for ``approve``, ship, wait for ``delivered`` (calls 1 to 5);
- ``v2``: behind ``sw.patched("fraud-check")`` (call 2) a new step, fraud_check, then ship before
  the approval and charge after it; executions that charged on v1 keep the v1 path;
- ``v3``: v2 once no v1 execution is left: ``sw.deprecate_patch("fraud-check")``, new path only;
- ``reordered``: v1 with ship and charge swapped, no patch (diverges from v1 histories);
- ``renamed``: v1 with charge renamed to bill;
- ``removed``: v1 without ship;
- ``short``: v1 that returns after shipping, without waiting for ``delivered``.

``ORDER_CODE`` (environment, default v1) picks the code of the module-level ``manager``, so
``sagaway replay tests.integration.patches_app:manager`` checks a database against it.
"""

from __future__ import annotations

import os
from typing import Any

import sagaway as sw

CODES = ("v1", "v2", "v3", "reordered", "renamed", "removed", "short")


def build(url: str | None, code: str, ledger: list[str] | None = None) -> sw.Manager:
    manager = sw.Manager(url, poll_interval=0.05)
    ledger = ledger if ledger is not None else []
    approve, delivered = manager.signal("approve"), manager.signal("delivered")

    def activity(name: str) -> Any:
        async def run(order: str) -> str:
            ledger.append(f"{name} {order}")
            return f"{name}-{order}"

        return manager.register_activity(name=name)(run)

    reserve, charge, ship = activity("reserve"), activity("charge"), activity("ship")
    bill, fraud_check, release = activity("bill"), activity("fraud_check"), activity("release")

    async def old_path(order: str) -> None:
        """v1: charge, wait for approval, ship (and the variants that change it)."""
        if code == "reordered":
            await ship(order)
        else:
            await (bill if code == "renamed" else charge)(order)
        await approve.receive(bool)
        if code == "reordered":
            await charge(order)
        elif code != "removed":
            await ship(order)

    async def new_path(order: str) -> None:
        """v2's change: a fraud check first, and ship before the approval, charge after."""
        await fraud_check(order)
        await ship(order)
        await approve.receive(bool)
        await charge(order)

    @manager.register_workflow(name="order")
    async def order(order_id: str) -> str:
        async with sw.Saga() as saga:
            saga.add_compensation(release, await reserve(order_id))
            if code == "v3":
                sw.deprecate_patch("fraud-check")
                await new_path(order_id)
            elif code == "v2" and sw.patched("fraud-check"):
                await new_path(order_id)
            else:
                await old_path(order_id)
            if code == "short":
                return "short"
            await delivered.receive(bool)
            return f"done {code}"

    return manager


manager = build(os.environ.get("SAGAWAY_DATABASE_URL"), os.environ.get("ORDER_CODE", "v1"))
# One Manager per deploy, for `sagaway replay tests.integration.patches_app:reordered` etc.
v1, v2, v3 = (build(None, v) for v in ("v1", "v2", "v3"))
reordered, renamed, removed, short = (build(None, v) for v in CODES[3:])
