# ruff: noqa
"""SW203: durable calls in workflow code that are never awaited."""

from __future__ import annotations

import sagaway as sw

manager = sw.Manager()


@manager.register_activity
async def pay(order: str) -> str:
    return f"pay-{order}"


@manager.register_activity
def notify(order: str) -> None:  # sync: inside a workflow it too must be awaited
    print(order)


@manager.register_workflow
async def child(order: str) -> None: ...


def log_step(order: str) -> None:
    notify(order)  # expect: SW203


@manager.register_workflow
async def checkout(order: str) -> str:
    receipt = pay(order)  # expect: SW203
    pay(order)  # expect: SW203
    notify(order)  # expect: SW203
    child(order)  # expect: SW203
    manager.activity(pay, order).execute_get()  # expect: SW203
    manager.workflow(child, order).execute()  # expect: SW203
    log_step(order)
    return receipt
